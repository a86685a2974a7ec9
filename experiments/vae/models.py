"""The VAE experiment's models, chosen by name (``config.model``).

Each entry builds a model of :mod:`gr_jax.models` from the config; the model
states its own bounds (``training_bound``, ``iwae_bound``), so a new model is
one class, one config and one entry here. An entry names the config fields
that only it reads (a field of another model is refused in one line) and the
choices its name stands for.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from flax import nnx
from ml_collections import ConfigDict

from experiments import config_checks
from gr_jax.models import categorical_vae, vae, vae_two_layer

CENTERINGS = ("running_average", "pixel_means", "none")


@dataclasses.dataclass(frozen=True)
class Model:
  """An entry of :data:`MODELS`.

  Attributes:
    build: ``(config, rngs) -> model``.
    description: one line, for messages and ``--list_fields``.
    fields: the config fields that this model alone reads.
    required: the choices its name stands for (field -> value).
    centerings: the ``center_inputs`` values it supports.
    multi_sample: whether the multi-sample estimators (RLOO, DisARM) train it
      (they sample one stochastic layer).
    kl_estimates: the ``kl_estimate`` values it supports.
    concrete_choices: whether it reads ``CONCRETE_CHOICES`` (else they keep their defaults).
    grey_targets: whether its likelihood reads grey levels (``binarization="none"``).
    any_arity: whether any number of categories >= 2 is allowed (else a power of two: the
      hypercube embedding's).
    kernel_inits: the ``kernel_init`` values it supports.
  """

  build: Callable[[ConfigDict, nnx.Rngs], nnx.Module]
  description: str
  fields: tuple[str, ...] = ()
  required: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  centerings: tuple[str, ...] = CENTERINGS
  multi_sample: bool = True
  kl_estimates: tuple[str, ...] = vae.KL_ESTIMATES
  concrete_choices: bool = False
  grey_targets: bool = False
  any_arity: bool = False
  kernel_inits: tuple[str, ...] = tuple(vae.KERNEL_INITS)


# Choices of Maddison et al. (2017) the one-layer Concrete model can make (gr_jax.models.vae:
# DiscreteVAE), with the defaults every other model keeps.
CONCRETE_CHOICES = {
  "binary_logits": "two",
  "encoder_input": "x",
  "relaxed_kl": "discrete",
  "relaxed_prior_tau": 0.0,
}


def _one_layer(config: ConfigDict, rngs: nnx.Rngs) -> vae.DiscreteVAE:
  return vae.DiscreteVAE(
    config.num_vars,
    config.arity,
    encoder_widths=tuple(config.encoder_widths),
    decoder_widths=tuple(config.decoder_widths),
    activation=config.activation,
    kernel_init=config.kernel_init,
    prior=config.prior,
    kl_estimate=config.kl_estimate,
    binary_logits=config.binary_logits,
    encoder_input=config.encoder_input,
    relaxed_kl=config.relaxed_kl,
    relaxed_prior_tau=config.relaxed_prior_tau,
    rngs=rngs,
  )


def _two_layer(config: ConfigDict, rngs: nnx.Rngs) -> vae_two_layer.TwoLayerDiscreteVAE:
  return vae_two_layer.TwoLayerDiscreteVAE(
    config.num_vars,
    config.arity,
    encoder_widths=tuple(config.encoder_widths),
    decoder_widths=tuple(config.decoder_widths),
    upper_encoder_widths=tuple(config.upper_encoder_widths),
    upper_decoder_widths=tuple(config.upper_decoder_widths),
    activation=config.activation,
    kernel_init=config.kernel_init,
    prior=config.prior,
    rngs=rngs,
  )


def _bernoulli(config: ConfigDict, rngs: nnx.Rngs) -> vae.BernoulliVAE:
  return vae.BernoulliVAE(
    config.num_vars,
    encoder_widths=tuple(config.encoder_widths),
    decoder_widths=tuple(config.decoder_widths),
    activation=config.activation,
    kernel_init=config.kernel_init,
    prior=config.prior,
    kl_estimate=config.kl_estimate,
    rngs=rngs,
  )


def _categorical(config: ConfigDict, rngs: nnx.Rngs) -> categorical_vae.CategoricalVAE:
  return categorical_vae.CategoricalVAE(
    config.num_vars,
    config.arity,
    encoder_widths=tuple(config.encoder_widths),
    decoder_widths=tuple(config.decoder_widths),
    activation=config.activation,
    logits_activation=config.logits_activation,
    likelihood_gradient=config.likelihood_gradient,
    rngs=rngs,
  )


# The DisARM protocol's Bernoulli VAEs (google-research disarm/binary: 200 latents; demeaned
# input, the output bias at the data's log-odds, Keras' Glorot kernels; linear, or two hidden
# layers of 200 with LeakyReLU on each side).
_BERNOULLI = {
  "arity": 2,
  "num_vars": 200,
  "kernel_init": "glorot_uniform",
  "decoder_output_bias": "data_log_odds",
  "center_inputs": "pixel_means",
  "prior": "learned",
}

MODELS = {
  "concrete": Model(
    _one_layer,
    "one stochastic layer: the Concrete paper's 240H~784V with the config's choices (widths,"
    " activation, kernels, output bias, centring, prior, binary logits, encoder input, GS's"
    " KL)",
    concrete_choices=True,
  ),
  "relu_mlp": Model(
    _one_layer,
    "one stochastic layer: the earlier ReLU 784-512-256 / 256-512-784 model (configs/"
    "vae_relu_mlp.py)",
    required={
      "encoder_widths": (512, 256),
      "decoder_widths": (256, 512),
      "activation": "relu",
      "kernel_init": "lecun_normal",
      "decoder_output_bias": "zeros",
      "center_inputs": "none",
      "prior": "uniform",
    },
  ),
  "concrete_two_layer": Model(
    _two_layer,
    "two stochastic layers: the Concrete paper's 240H~240H~784V (q(h1 | x) q(h2 | h1), p(h2)"
    " p(h1 | h2) p(x | h1)), each inference input centred by its own running average",
    fields=("upper_encoder_widths", "upper_decoder_widths"),
    centerings=("running_average", "none"),
    multi_sample=False,
    # Its cascade's log q(h2 | h1) also carries h1's pathwise gradient, and p(h1 | h2) has no
    # closed-form expectation over h2: only the sampled bound.
    kl_estimates=("sampled",),
  ),
  "bernoulli_linear": Model(
    _bernoulli,
    "the DisARM protocol's linear Bernoulli VAE: 784 -> 200 binary latents -> 784",
    required={**_BERNOULLI, "encoder_widths": (), "decoder_widths": ()},
  ),
  "bernoulli_nonlinear": Model(
    _bernoulli,
    "the DisARM protocol's non-linear Bernoulli VAE: 784-200-200-200 latents-200-200-784,"
    " LeakyReLU",
    required={
      **_BERNOULLI,
      "encoder_widths": (200, 200),
      "decoder_widths": (200, 200),
      "activation": "leaky_relu",
    },
  ),
  "categorical": Model(
    _categorical,
    "the GST / ReinMax categorical VAE: 784-512-256 ReLU to num_vars x arity logits, the one-hot"
    " samples flattened into 256-512-784, uniform prior, exact KL, grey-level targets",
    fields=("logits_activation", "likelihood_gradient", "mse_reference"),
    required={
      "encoder_widths": (512, 256),
      "decoder_widths": (256, 512),
      "decoder_output_bias": "zeros",
      "center_inputs": "none",
      "prior": "uniform",
    },
    kl_estimates=("analytic",),
    grey_targets=True,
    any_arity=True,
    kernel_inits=("torch_linear",),  # PyTorch's nn.Linear: +-1/sqrt(fan-in), bias included
  ),
}
# Config fields that are widths of hidden layers (tuples of ints >= 1; empty: no hidden layer).
WIDTH_FIELDS = ("encoder_widths", "decoder_widths", "upper_encoder_widths", "upper_decoder_widths")
# Fields added to the VAE config after runs were saved without them, with the values that train
# what those runs trained (a resumed older run is this config's run).
ADDED_FIELDS = {
  "model": ("concrete", "relu_mlp"),
  "binarization": ("fixed",),
  "optimizer": ("sgd_momentum",),
  "prior_learning_rate": (0.01,),  # read by optimizer="adam" only
  "kl_estimate": ("sampled",),
  **{field: (default,) for field, default in CONCRETE_CHOICES.items()},
  "loss_reduction": ("mean",),
  "train_split": ("train",),
  "variance_ema_decay": (0.0,),
}


def check(config: ConfigDict) -> Model:
  """The config's model entry; ConfigError (one line) for an unknown name, another model's field,
  or a choice the name does not allow."""
  config_checks.require(
    config.model in MODELS, "model", f"one of {tuple(MODELS)}", config.get("model")
  )
  entry = MODELS[config.model]
  for name, other in MODELS.items():
    for field in other.fields:
      if field in config and field not in entry.fields:
        raise config_checks.ConfigError(
          f"config.{field} belongs to model {name!r}; config.model={config.model!r} does not"
          f" read it: remove the field or set model to {name!r}."
        )
  for field, value in entry.required.items():
    chosen = tuple(config[field]) if isinstance(value, tuple) else config[field]
    config_checks.require(
      chosen == value, field, f"{value!r} with model {config.model!r}", config[field]
    )
  for field in WIDTH_FIELDS:
    if field in config:
      widths = config[field]
      config_checks.require(
        isinstance(widths, (tuple, list))
        and all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in widths),
        field,
        "a tuple of ints >= 1 (the hidden layers' widths; () for none)",
        widths,
      )
  config_checks.require(
    config.center_inputs in entry.centerings,
    "center_inputs",
    f"one of {entry.centerings} with model {config.model!r}",
    config.center_inputs,
  )
  for field, default in CONCRETE_CHOICES.items():
    if not entry.concrete_choices:
      config_checks.require(
        config[field] == default, field, f"{default!r} with model {config.model!r}", config[field]
      )
  for field, allowed in (
    ("binary_logits", vae.BINARY_LOGITS),
    ("encoder_input", vae.ENCODER_INPUTS),
    ("relaxed_kl", vae.RELAXED_KLS),
  ):
    config_checks.require(config[field] in allowed, field, f"one of {allowed}", config[field])
  config_checks.require(
    config.binary_logits == CONCRETE_CHOICES["binary_logits"] or config.arity == 2,
    "binary_logits",
    f"{CONCRETE_CHOICES['binary_logits']!r} unless arity is 2 (binary latents)",
    config.binary_logits,
  )
  config_checks.require(
    config_checks.is_number(config.relaxed_prior_tau) and config.relaxed_prior_tau >= 0,
    "relaxed_prior_tau",
    "a number >= 0 (0: the posterior's tau)",
    config.relaxed_prior_tau,
  )
  config_checks.require(
    config.activation in ("relu", "leaky_relu") or config.model != "categorical",
    "activation",
    "'relu' or 'leaky_relu' with model 'categorical'",
    config.activation,
  )
  if "logits_activation" in config:
    allowed = categorical_vae.LOGITS_ACTIVATIONS
    config_checks.require(
      config.logits_activation in allowed,
      "logits_activation",
      f"one of {allowed}",
      config.logits_activation,
    )
  config_checks.require(
    config.kernel_init in entry.kernel_inits,
    "kernel_init",
    f"one of {entry.kernel_inits} with model {config.model!r}",
    config.kernel_init,
  )
  if "likelihood_gradient" in config:
    _check_enumeration(config)
  config_checks.require(
    config.binarization != "none" or entry.grey_targets,
    "binarization",
    f"'fixed' or 'dynamic' with model {config.model!r} (its likelihood is of binary pixels;"
    " grey-level targets: model 'categorical')",
    config.binarization,
  )
  config_checks.require(
    config.kl_estimate in entry.kl_estimates,
    "kl_estimate",
    f"one of {entry.kl_estimates} with model {config.model!r}",
    config.kl_estimate,
  )
  return entry


def _check_enumeration(config: ConfigDict) -> None:
  """The categorical model's exact options: values, and C ** L small enough to enumerate."""
  for field, allowed in (
    ("likelihood_gradient", categorical_vae.LIKELIHOOD_GRADIENTS),
    ("mse_reference", ("reinforce", "exact")),
  ):
    config_checks.require(config[field] in allowed, field, f"one of {allowed}", config[field])
    if config[field] == "exact":
      count = config.arity**config.num_vars
      config_checks.require(
        count <= categorical_vae.MAX_CONFIGURATIONS,
        field,
        f"not 'exact' for {config.arity}^{config.num_vars} = {count} configurations (at most"
        f" {categorical_vae.MAX_CONFIGURATIONS} are enumerated)",
        config[field],
      )


def build(config: ConfigDict, rngs: nnx.Rngs) -> nnx.Module:
  return MODELS[config.model].build(config, rngs)
