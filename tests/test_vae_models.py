"""Tests of experiments/vae/models.py: the VAE experiment's models by name, and their fields."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import (
  bernoulli_vae_linear,
  bernoulli_vae_nonlinear,
  vae_2ary,
  vae_16ary,
  vae_relu_mlp,
  vae_two_layer_16ary,
)
from configs import categorical_vae as categorical_vae_config
from experiments import config_checks, workdir
from experiments.vae import data, models
from experiments.vae import experiment as vae_experiment
from experiments.vae.task import VAETask, make_optimizer
from gr_jax import estimators
from gr_jax.data import idx_images
from gr_jax.models import vae


def test_an_unknown_model_is_one_line_listing_the_names():
  config = vae_16ary.get_config()
  config.model = "concrete_3_layers"
  with pytest.raises(
    config_checks.ConfigError, match=r"^config\.model must be one of \('concrete'"
  ):
    models.check(config)


def test_the_relu_model_is_reachable_by_name_and_its_choices_are_checked():
  config = vae_relu_mlp.get_config()
  assert config.model == "relu_mlp" and models.check(config) is models.MODELS["relu_mlp"]
  model = models.build(config, nnx.Rngs(0))
  assert isinstance(model, vae.DiscreteVAE) and model.encoder.layers[0].out_features == 512
  config.activation = "tanh"
  with pytest.raises(config_checks.ConfigError, match=r"^config\.activation must be 'relu' with"):
    models.check(config)


def test_a_two_layer_field_on_a_one_layer_model_is_refused_in_one_line():
  config = vae_two_layer_16ary.get_config()
  assert models.check(config) is models.MODELS["concrete_two_layer"]
  config.model = "concrete"
  with pytest.raises(
    config_checks.ConfigError,
    match=r"^config\.upper_encoder_widths belongs to model 'concrete_two_layer'; config\.model="
    r"'concrete' does not read it: remove the field or set model to 'concrete_two_layer'\.$",
  ):
    models.check(config)


@pytest.mark.parametrize("widths", [(0, 240), (-3,), (2.5,), ("a",)])
def test_widths_are_tuples_of_positive_ints(widths):
  config = vae_two_layer_16ary.get_config()
  config.upper_decoder_widths = widths
  with pytest.raises(config_checks.ConfigError, match=r"^config\.upper_decoder_widths must be a"):
    models.check(config)
  config.upper_decoder_widths = ()  # no hidden layer: allowed
  models.check(config)


def test_the_two_layer_model_takes_no_fixed_pixel_means():
  config = vae_two_layer_16ary.get_config()
  config.center_inputs = "pixel_means"
  with pytest.raises(config_checks.ConfigError, match=r"^config\.center_inputs must be one of"):
    models.check(config)


def test_a_run_saved_before_models_had_names_resumes_with_the_named_model():
  """An older config.json has no 'model': the one-layer names train what it trained."""
  new = workdir.flatten(vae_16ary.get_config().to_dict())
  saved = {k: v for k, v in new.items() if k != "model"}
  assert workdir.differing_fields(saved, new, added_fields=models.ADDED_FIELDS) == []
  assert workdir.differing_fields(saved, new) == ["model"]
  assert workdir.differing_fields(
    saved, {**new, "model": "another"}, added_fields=models.ADDED_FIELDS
  ) == ["model"]


@pytest.mark.parametrize("config_module", [bernoulli_vae_linear, bernoulli_vae_nonlinear])
def test_the_bernoulli_models_are_the_protocols(config_module):
  """One logit alpha per latent (the one-hot logits (0, alpha)), the decoder's input 2b - 1, the
  prior's logits (0, prior); linear: one dense map each way; the choices their names fix."""
  config = config_module.get_config()
  entry = models.check(config)
  model = models.build(config, nnx.Rngs(0))
  assert isinstance(model, vae.BernoulliVAE)
  layers = len(model.encoder.layers)
  assert layers == (1 if config.model == "bernoulli_linear" else 3)
  x = jax.numpy.ones((2, 784))
  logits = model.encode(x)
  np.testing.assert_array_equal(logits[..., 0], 0.0)
  np.testing.assert_array_equal(logits[..., 1], model.encoder(x))
  b = jax.nn.one_hot(jax.numpy.array([[0, 1] * 100]), 2)
  np.testing.assert_allclose(model.decode(b), model.decoder(2.0 * b[..., 1] - 1.0), rtol=1e-6)
  assert model.prior_logits.get_value().shape == (200,)
  other = {tuple: (7,), str: "another", int: 4}
  for field, value in entry.required.items():
    config[field] = other[type(value)]
    with pytest.raises(config_checks.ConfigError, match=rf"^config\.{field} must be"):
      models.check(config)
    config = config_module.get_config()


def test_adam_for_the_networks_and_sgd_for_the_prior():
  """optimizer="adam": one step moves the prior's logits by -prior_learning_rate x gradient (plain
  SGD) and every network weight by about -learning_rate (Adam's first step: lr g / (|g| + eps))."""
  config = bernoulli_vae_linear.get_config()
  config.dataset = "synthetic_grey"
  task = VAETask(config, estimators.get("st_gs"), np.full(784, 0.3))
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  x = jnp.asarray(np.random.default_rng(0).random((50, 784)) < 0.3, jnp.float32)
  grads = jax.grad(lambda p: task.loss(p, x, jax.random.key(1), 0.0, 1.0, member["input_mean"])[0])(
    member["params"]
  )
  after, _ = task.train_step(member, hyper, x, jax.random.key(1), 1)
  prior_step = after["params"]["prior_logits"] - member["params"]["prior_logits"]
  np.testing.assert_allclose(prior_step, -1e-2 * grads["prior_logits"], rtol=1e-5, atol=1e-9)
  kernel = member["params"]["encoder"]["layers"][0]["kernel"]
  kernel_step = after["params"]["encoder"]["layers"][0]["kernel"] - kernel
  moved = np.abs(np.asarray(grads["encoder"]["layers"][0]["kernel"])) > 1e-3
  np.testing.assert_allclose(np.abs(kernel_step)[moved], 1e-4, rtol=1e-3)


@pytest.mark.parametrize("name", ["st_gs", "gr_mc10"])
def test_an_estimator_averaged_over_draws_is_the_mean_of_its_draws(name):
  """``<name>_x2``: its loss and gradient are exactly the mean of the one-draw estimator's at the
  two keys split from the step's key (the equal-evaluation rows beside DisARM and RLOO-2)."""
  config = bernoulli_vae_linear.get_config()
  config.dataset = "synthetic_grey"
  task = VAETask(config, estimators.get(f"{name}_x2"), np.full(784, 0.3))
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  x = jnp.asarray(np.random.default_rng(0).random((50, 784)) < 0.3, jnp.float32)

  def loss_and_grad(key, estimator=None):
    return jax.value_and_grad(
      lambda p: task.loss(p, x, key, 0.0, 0.7, member["input_mean"], estimator)[0]
    )(member["params"])

  averaged = loss_and_grad(jax.random.key(5))
  draws = [loss_and_grad(k, estimators.get(name)) for k in jax.random.split(jax.random.key(5), 2)]
  expected = jax.tree.map(lambda a, b: (a + b) / 2, *draws)
  for got, want in zip(jax.tree.leaves(averaged), jax.tree.leaves(expected)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
  assert not np.allclose(jax.tree.leaves(draws[0])[0], jax.tree.leaves(draws[1])[0])


def test_multi_sample_estimators_are_refused_on_the_two_layer_model():
  config = vae_two_layer_16ary.get_config()
  config.estimator = "rloo2"
  with pytest.raises(config_checks.ConfigError, match=r"^config\.estimator 'rloo2' samples one"):
    vae_experiment.validate(config)


def test_the_kl_estimate_is_checked_against_the_model_and_the_estimator():
  config = vae_two_layer_16ary.get_config()
  config.kl_estimate = "analytic"
  with pytest.raises(
    config_checks.ConfigError,
    match=r"^config\.kl_estimate must be one of \('sampled',\) with model 'concrete_two_layer'",
  ):
    vae_experiment.validate(config)
  config = bernoulli_vae_linear.get_config()  # DisARM: multi-sample
  config.kl_estimate = "pathwise"
  with pytest.raises(
    config_checks.ConfigError, match=r"^config\.kl_estimate must be 'sampled' with the multi-sample"
  ):
    vae_experiment.validate(config)
  config.estimator = "st_gs"
  vae_experiment.validate(config)


def test_a_run_saved_before_kl_estimate_resumes_as_sampled():
  new = workdir.flatten(vae_16ary.get_config().to_dict())
  saved = {k: v for k, v in new.items() if k != "kl_estimate"}
  assert workdir.differing_fields(saved, new, added_fields=models.ADDED_FIELDS) == []
  assert workdir.differing_fields(
    saved, {**new, "kl_estimate": "analytic"}, added_fields=models.ADDED_FIELDS
  ) == ["kl_estimate"]


@pytest.mark.parametrize("kl_estimate", vae.KL_ESTIMATES)
def test_a_training_step_with_each_kl_estimate(kl_estimate):
  """The configured KL term reaches the training step: its logged ``kl`` is the exact KL for
  "analytic", and the sampled log q - log p (the same value with or without the direct gradient)
  otherwise."""
  config = vae_16ary.get_config()
  config.dataset = "synthetic"
  config.kl_estimate = kl_estimate
  vae_experiment.validate(config)
  task = VAETask(config, estimators.get("st_gs"))
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  x = jnp.asarray(np.random.default_rng(0).random((8, 784)) < 0.3, jnp.float32)
  key = jax.random.key(1)
  _, metrics = task.train_step(member, hyper, x, key, 1)
  model = task.model(member["params"])
  log_q = jax.nn.log_softmax(model.encode(x - member["input_mean"]), axis=-1)
  exact_kl = np.mean(np.sum(np.exp(log_q) * (log_q - model.log_prior()), axis=(-2, -1)))
  if kl_estimate == "analytic":
    np.testing.assert_allclose(metrics["kl"], exact_kl, rtol=1e-5)
  else:
    config.kl_estimate = "sampled"
    _, sampled_metrics = VAETask(config, estimators.get("st_gs")).train_step(
      member, hyper, x, key, 1
    )
    np.testing.assert_allclose(metrics["kl"], sampled_metrics["kl"], rtol=1e-6)
    assert not np.isclose(metrics["kl"], exact_kl, rtol=1e-3)  # one sample, not the expectation
    # The direct term reaches the encoder only: "pathwise" changes its gradient, not the decoder's.
    grads = [
      jax.grad(lambda p, t=t: t.loss(p, x, key, 0.0, 0.5, member["input_mean"])[0])(
        member["params"]
      )
      for t in (task, VAETask(config, estimators.get("st_gs")))
    ]
    decoder, encoder = (
      [np.concatenate([np.ravel(v) for v in jax.tree.leaves(g[name])]) for g in grads]
      for name in ("decoder", "encoder")
    )
    np.testing.assert_allclose(decoder[0], decoder[1], rtol=1e-5, atol=1e-7)
    assert (kl_estimate == "pathwise") == (not np.allclose(encoder[0], encoder[1], atol=1e-6))


def test_the_loss_summed_over_the_batch_has_b_times_the_gradient():
  config = vae_2ary.get_config()
  config.dataset = "synthetic"
  task = VAETask(config, estimators.get("st_gs"))
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  x = jnp.asarray(np.random.default_rng(0).random((20, 784)) < 0.3, jnp.float32)

  def grad():
    loss = lambda p: task.loss(p, x, jax.random.key(3), 0.0, 0.64, member["input_mean"])[0]
    return jax.grad(loss)(member["params"])

  mean = grad()
  config.loss_reduction = "sum"
  vae_experiment.validate(config)
  for summed, averaged in zip(jax.tree.leaves(grad()), jax.tree.leaves(mean)):
    # float32 sums of 20 terms in two orders: a tolerance relative to the leaf's largest entry.
    np.testing.assert_allclose(summed, 20 * averaged, rtol=1e-4, atol=1e-5 * np.abs(summed).max())


def test_the_concrete_choices_reach_the_model_and_are_checked():
  config = vae_2ary.get_config()
  config.dataset = "synthetic"
  config.update(binary_logits="one", encoder_input="2x-1", center_inputs="pixel_means")
  vae_experiment.validate(config)
  task = VAETask(config, estimators.get("st_gs"), np.full(784, 0.25))
  np.testing.assert_allclose(task.initial_input_mean, -0.5)  # the mean of 2x - 1
  model = models.build(config, nnx.Rngs(0))
  assert model.one_logit and model.encoder.layers[-1].out_features == 240
  refusals = [
    (vae_16ary, {"binary_logits": "one"}, r"binary_logits must be 'two' unless arity is 2"),
    (vae_2ary, {"relaxed_kl": "concrete"}, r"relaxed_kl must be 'discrete' unless the estimator"),
    (vae_two_layer_16ary, {"encoder_input": "2x-1"}, r"encoder_input must be 'x' with model"),
    (vae_2ary, {"encoder_input": "x2"}, r"encoder_input must be one of \('x', '2x-1'\)"),
    (vae_2ary, {"relaxed_prior_tau": -1.0}, r"relaxed_prior_tau must be a number >= 0"),
    (vae_2ary, {"loss_reduction": "total"}, r"loss_reduction must be one of \('mean', 'sum'\)"),
  ]
  for module, fields, message in refusals:
    config = module.get_config()
    config.update(fields)
    with pytest.raises(config_checks.ConfigError, match="^config\\." + message):
      vae_experiment.validate(config)
  for module in (vae_2ary, vae_16ary):  # the Concrete densities: binary and n-ary GS
    config = module.get_config()
    config.update(estimator="gs", relaxed_kl="concrete", relaxed_prior_tau=0.5)
    vae_experiment.validate(config)
    assert models.build(config, nnx.Rngs(0)).relaxed_kl == "concrete"


def test_a_run_saved_before_the_concrete_choices_resumes_with_the_defaults():
  new = workdir.flatten(vae_16ary.get_config().to_dict())
  added = ("binary_logits", "encoder_input", "relaxed_kl", "relaxed_prior_tau", "loss_reduction")
  saved = {k: v for k, v in new.items() if k not in added}
  assert workdir.differing_fields(saved, new, added_fields=models.ADDED_FIELDS) == []
  assert workdir.differing_fields(
    saved, {**new, "loss_reduction": "sum"}, added_fields=models.ADDED_FIELDS
  ) == ["loss_reduction"]


def test_the_categorical_model_trains_on_grey_levels_with_the_published_hyperparameters():
  """configs/categorical_vae.py:SHAPE: each shape's ReinMax row, C categories of L variables, and
  a training step on grey-level targets (binarization="none": the images / 255, every split)."""
  for shape in categorical_vae_config.SHAPES:
    config = categorical_vae_config.get_config(shape)
    vae_experiment.validate(config)
    assert f"{config.arity}x{config.num_vars}" == shape
  assert categorical_vae_config.published_hyperparameters("zgr", "16x12") == (
    7e-4,
    1.5,
    "torch_radam",
  )  # ZGR takes ReinMax's row
  assert categorical_vae_config.published_hyperparameters("st_gs", "8x4") == (
    3e-4,
    0.5,
    "torch_adam",
  )
  with pytest.raises(ValueError, match="shape must be one of"):
    categorical_vae_config.published_hyperparameters("st_gs", "3x3")
  config = categorical_vae_config.get_config("8x4")
  config.dataset = "synthetic_grey"
  loaded = data.load(config)
  raw = idx_images.synthetic()
  assert loaded.train.dtype == np.float32 and len(loaded.train) == len(raw["train"]) + len(
    raw["valid"]
  )  # train+valid
  np.testing.assert_allclose(loaded.test, raw["test"] / 255.0, rtol=1e-6)
  task = VAETask(config, estimators.get("gr_mc10"), loaded.pixel_means)
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  _, metrics = task.train_step(member, hyper, jnp.asarray(loaded.train[:100]), jax.random.key(1), 1)
  assert np.isfinite(metrics["neg_elbo"]) and metrics["kl"] >= 0


def test_torch_adam_and_radam_first_steps():
  """PyTorch's first steps: Adam moves each weight by lr * g / (|g| + 1e-8); RAdam's first step
  is unrectified (the variance's degrees of freedom are below 5), lr * g."""
  config = categorical_vae_config.get_config("8x4")
  grads = {"w": jnp.array([0.5, -2.0, 1e-3])}
  params = {"w": jnp.zeros(3)}
  for optimizer, want in (
    ("torch_adam", -1e-2 * grads["w"] / (jnp.abs(grads["w"]) + 1e-8)),
    ("torch_radam", -1e-2 * grads["w"]),
  ):
    config.optimizer = optimizer
    transform = make_optimizer(config)(learning_rate=1e-2, momentum=0.0, weight_decay=0.0)
    updates, _ = transform.update(grads, transform.init(params), params)
    np.testing.assert_allclose(updates["w"], want, rtol=1e-5)


@pytest.mark.parametrize(
  "module, fields, message",
  [
    (vae_2ary, {"binarization": "none", "dataset": "mnist"}, r"binarization must be 'fixed' or"),
    (vae_2ary, {"kernel_init": "torch_linear"}, r"kernel_init must be one of \('glorot_uniform'"),
    (vae_2ary, {"arity": 10, "num_vars": 24}, r"arity must be a power of two"),
    (vae_2ary, {"train_split": "all"}, r"train_split must be one of \('train', 'train\+valid'\)"),
  ],
)
def test_the_categorical_choices_are_refused_elsewhere(module, fields, message):
  config = module.get_config()
  config.update(fields)
  with pytest.raises(config_checks.ConfigError, match="^config\\." + message):
    vae_experiment.validate(config)


def test_the_exact_reference_and_the_exact_row_of_the_categorical_model():
  """mse_reference="exact": the estimators' bias and MSE against the enumerated gradient (ST-GS:
  a positive squared bias); likelihood_gradient="exact" checked against the shape and estimator."""
  config = categorical_vae_config.get_config("8x4")
  config.update(dataset="synthetic_grey", num_vars=2, arity=3, mse_reference="exact")
  config.variance_draws = 8
  vae_experiment.validate(config)
  task = VAETask(config, estimators.get("st_gs"))
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  x = jnp.asarray(np.random.default_rng(0).random((10, 784)), jnp.float32)
  out = task.gradient_measurements(member, 0.5, 0, x, 0, mse=True)
  assert (
    np.isfinite(out["log10_grad_squared_bias"])
    and out["log10_grad_mse"] > out["log10_grad_variance"]
  )
  config.likelihood_gradient = "exact"
  vae_experiment.validate(config)
  for fields, message in (
    ({"estimator": "reinforce"}, r"estimator must be a one-hot, single-evaluation estimator"),
    ({"arity": 10, "num_vars": 30}, r"likelihood_gradient must be not 'exact' for 10\^30"),
  ):
    bad = config.copy_and_resolve_references()
    bad.update(fields)
    with pytest.raises(config_checks.ConfigError, match="^config\\." + message):
      vae_experiment.validate(bad)


def test_the_disarm_codes_variance_column_is_a_moving_average_of_the_encoder_gradient():
  """variance_ema_decay=d: after steps with encoder gradients g1, g2 the averages are
  m = d (1 - d) g1 + (1 - d) g2 and s likewise of g**2 (both from 0), and ema_grad_variance is the
  mean over every encoder component of s - m**2 (google-research disarm's definition)."""
  config = bernoulli_vae_linear.get_config()
  config.update(dataset="synthetic_grey", estimator="st_gs", variance_ema_decay=0.9)
  vae_experiment.validate(config)
  task = VAETask(config, estimators.get("st_gs"), np.full(784, 0.3))
  hyper = {k: jnp.float32(config[k]) for k in vae_experiment.HYPERPARAMETERS}
  member = task.init_member(jax.random.key(0), hyper, 0)
  x = jnp.asarray(np.random.default_rng(0).random((50, 784)) < 0.3, jnp.float32)
  gradients, metrics = [], None
  for step, key in enumerate(jax.random.split(jax.random.key(1), 2), start=1):
    grads = jax.grad(task.loss, has_aux=True)(
      member["params"], x, key, member["baseline"].mean, hyper["tau"], member["input_mean"]
    )[0]
    gradients.append(np.concatenate([np.ravel(g) for g in jax.tree.leaves(grads["encoder"])]))
    member, metrics = task.train_step(member, hyper, x, key, step)
  mean = 0.9 * 0.1 * gradients[0] + 0.1 * gradients[1]
  square = 0.9 * 0.1 * gradients[0] ** 2 + 0.1 * gradients[1] ** 2
  np.testing.assert_allclose(metrics["ema_grad_variance"], np.mean(square - mean**2), rtol=1e-4)
  got = np.concatenate([np.ravel(m) for m in jax.tree.leaves(member["grad_ema"]["mean"])])
  np.testing.assert_allclose(got, mean, rtol=1e-4, atol=1e-9)
  config.variance_ema_decay = 1.0
  with pytest.raises(config_checks.ConfigError, match=r"^config\.variance_ema_decay must be a"):
    vae_experiment.validate(config)
