"""Puts the clone's root on ``sys.path``, for the scripts that import ``experiments`` and
``configs``.

``pip install`` ships the ``gr_jax`` library only (no top-level ``experiments`` or
``configs`` packages in site-packages); the experiments run from a clone.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
  sys.path.insert(0, str(ROOT))
