"""Tests of experiments/vae/models.py: the VAE experiment's models by name, and their fields."""

import pytest
from flax import nnx

from configs import vae_16ary, vae_relu_mlp, vae_two_layer_16ary
from experiments import config_checks, workdir
from experiments.vae import models
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
