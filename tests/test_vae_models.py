"""Tests of experiments/vae/models.py: the VAE experiment's models by name, and their fields."""

import pytest
from flax import nnx

from configs import vae_16ary, vae_relu_mlp
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


def test_a_run_saved_before_models_had_names_resumes_with_the_named_model():
  """An older config.json has no 'model': the one-layer names train what it trained."""
  new = workdir.flatten(vae_16ary.get_config().to_dict())
  saved = {k: v for k, v in new.items() if k != "model"}
  assert workdir.differing_fields(saved, new, added_fields=models.ADDED_FIELDS) == []
  assert workdir.differing_fields(saved, new) == ["model"]
  assert workdir.differing_fields(
    saved, {**new, "model": "another"}, added_fields=models.ADDED_FIELDS
  ) == ["model"]
