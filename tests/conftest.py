"""The suite's shared set-up: one JAX compilation cache for every test and every CLI it starts,
compiled at LLVM's optimization level 1 with XLA:CPU's legacy emitters (faster to compile).

The integration tests run the CLI dozens of times on the same tiny configs, and
most of each run is XLA compiling the same programs again. JAX's persistent
cache (keyed by the program, so results are unchanged: a cached executable is
the one the compiler would produce) lets each program compile once per session,
in whichever test or subprocess first needs it. The pytest-xdist workers and the
subprocesses inherit the directory through the environment; a cache the user
set already is kept.
"""

import os
import shutil
import tempfile

import pytest

_CACHE = "JAX_COMPILATION_CACHE_DIR"


def pytest_configure(config):
  if hasattr(config, "workerinput"):
    return  # an xdist worker: it inherited the controller's environment
  # LLVM at optimization level 1 for the suite's programs: the estimator tests' (compilation
  # bound) take three quarters of their time at level 2, the default, and a training run's steps
  # run as fast (level 0 compiles faster still, but runs them 2.5x slower). XLA:CPU's legacy
  # elemental emitters instead of its MLIR fusion emitters: the estimator tests take 28 % less
  # CPU (a 3,000-step tiny population runs 1.2x slower; the suite's runs are mostly a few steps).
  # XLA's own passes (fusion, simplification) run as always; the tests compare programs compiled
  # alike.
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_backend_optimization_level" not in flags:
    flags += " --xla_backend_optimization_level=1"
  if "xla_cpu_use_fusion_emitters" not in flags:
    flags += " --xla_cpu_use_fusion_emitters=false"
  os.environ["XLA_FLAGS"] = flags.strip()
  if os.environ.get(_CACHE):
    return  # the user's own cache
  config.gr_jax_cache = tempfile.mkdtemp(prefix="gr_jax_test_jax_cache_")
  os.environ[_CACHE] = config.gr_jax_cache
  # Cache every program: the tiny test programs compile in well under JAX's default 1 s floor.
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


def pytest_unconfigure(config):
  if getattr(config, "gr_jax_cache", None):
    shutil.rmtree(config.gr_jax_cache, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fake_datasets_are_read_unchecked(request, monkeypatch):
  """Unit tests write small fake datasets under the real datasets' names (binarized_mnist,
  mnist, fashion_mnist), which the loaders refuse as not the releases' content: their check is
  waived (GR_JAX_UNVERIFIED_DATA=all, inherited by the CLIs the tests start), except in the tests
  marked ``checks_data_content``, which test it."""
  if request.node.get_closest_marker("checks_data_content") is None:
    monkeypatch.setenv("GR_JAX_UNVERIFIED_DATA", "all")
  else:
    monkeypatch.delenv("GR_JAX_UNVERIFIED_DATA", raising=False)


def pytest_collection_modifyitems(config, items):
  """The integration tests (marked slow: whole runs, subprocesses) first, the unit tests after:
  the xdist workers hand out tests in this order, so the short ones fill the workers' ends
  instead of a long run starting last on one worker while the others wait."""
  items.sort(key=lambda item: item.get_closest_marker("slow") is None)
