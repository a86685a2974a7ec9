"""The VAE's pure functions of one member (for :class:`experiments.population.Trainer`): the model,
its optimizer, a training step, the IWAE bound and the gradient measurements."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from ml_collections import ConfigDict

from experiments import rng, schedules
from experiments.vae import models
from gr_jax import diagnostics, estimators

OPTIMIZERS = ("sgd_momentum", "adam", "torch_adam", "torch_radam")
# The training loss over the batch (config.loss_reduction).
LOSS_REDUCTIONS = ("mean", "sum")


@optax.inject_hyperparams
def _sgd_momentum(learning_rate, momentum, weight_decay) -> optax.GradientTransformation:
  """SGD with momentum and weight decay (the paper's)."""
  return optax.chain(
    optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate, momentum=momentum)
  )


@optax.inject_hyperparams
def _torch_adam(learning_rate, momentum, weight_decay) -> optax.GradientTransformation:
  """PyTorch's ``optim.Adam`` at its defaults (betas 0.9, 0.999, eps 1e-8) for every
  parameter (GST's and ReinMax's); weight decay as PyTorch's, added to the gradient."""
  del momentum
  return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(learning_rate, eps=1e-8))


@optax.inject_hyperparams
def _torch_radam(learning_rate, momentum, weight_decay) -> optax.GradientTransformation:
  """PyTorch's ``optim.RAdam`` at its defaults (betas 0.9, 0.999, eps 1e-8; the rectified step
  where the variance's degrees of freedom exceed 5, as optax's)."""
  del momentum
  return optax.chain(
    optax.add_decayed_weights(weight_decay), optax.radam(learning_rate, eps=1e-8, threshold=5.0)
  )


def _parameter_groups(params: dict) -> dict:
  """Each parameter's optimizer group: the prior's logits, or the networks."""
  return {
    name: jax.tree.map(lambda _, name=name: "prior" if name == "prior_logits" else "networks", tree)
    for name, tree in params.items()
  }


def make_optimizer(config: ConfigDict):
  """``(learning_rate, momentum, weight_decay) -> optax transformation``, the hyperparameters in
  its state (``optax.inject_hyperparams``: a population's members differ in them as data).

  ``config.optimizer``: ``"sgd_momentum"`` (the paper's: SGD with momentum and
  weight decay), ``"adam"`` (the DisARM protocol's: Adam for the encoder and
  decoder at ``learning_rate`` (Keras' defaults: eps 1e-7), plain SGD for the
  prior's logits at ``config.prior_learning_rate``; momentum unused), or
  ``"torch_adam"`` / ``"torch_radam"`` (PyTorch's Adam / RAdam at their defaults for
  every parameter: the GST / ReinMax protocol's; momentum unused).
  """
  if config.optimizer == "sgd_momentum":
    return _sgd_momentum
  if config.optimizer in ("torch_adam", "torch_radam"):
    return _torch_adam if config.optimizer == "torch_adam" else _torch_radam
  prior_learning_rate = config.prior_learning_rate

  @optax.inject_hyperparams
  def adam(learning_rate, momentum, weight_decay):
    del momentum
    networks = optax.chain(
      optax.add_decayed_weights(weight_decay), optax.adam(learning_rate, eps=1e-7)
    )
    return optax.multi_transform(
      {"networks": networks, "prior": optax.sgd(prior_learning_rate)}, _parameter_groups
    )

  return adam


def _optimizer_hyperparameters(hyperparameters: dict) -> dict:
  return {k: hyperparameters[k] for k in ("learning_rate", "momentum", "weight_decay")}


class VAETask:
  """The VAE's pure functions of one member, for :class:`experiments.population.Trainer`.

  The model is ``config.model``'s (:mod:`experiments.vae.models`); the task
  calls the bounds it states (``training_bound``, ``iwae_bound``).
  ``pixel_means`` (the training images' per-pixel means, ``[784]``) feed
  ``decoder_output_bias="data_log_odds"`` (the decoder's output bias starts at
  the pixels' log-odds, Maddison et al. 2017, appendix D.3) and
  ``center_inputs="pixel_means"``. Each inference network sees its input minus
  the member's centring (``input_mean``: the structure of the model's
  ``initial_centering``): with ``center_inputs="running_average"`` (their
  appendix D.4) an exponentially decaying average of the training minibatches'
  means of that input (rate ``centering_decay``, starting at 0), updated after
  each step's use and frozen in evaluation; with ``"pixel_means"`` the fixed
  training means (one-layer models); with ``"none"`` zeros.
  """

  def __init__(
    self, config: ConfigDict, estimator: estimators.Estimator, pixel_means: np.ndarray | None = None
  ):
    self.config, self.estimator = config, estimator
    if pixel_means is None:
      pixel_means = np.full(784, 0.5, np.float32)
    means = np.clip(np.asarray(pixel_means, np.float64), 1e-3, 1 - 1e-3)
    self.output_bias = jnp.asarray(np.log(means) - np.log1p(-means), jnp.float32)
    template = models.build(config, nnx.Rngs(0))
    self.initial_input_mean = (
      template.inference_input(jnp.asarray(pixel_means, jnp.float32))
      if config.center_inputs == "pixel_means"
      else template.initial_centering()
    )
    self.graphdef = nnx.graphdef(template)
    self.inference_networks = template.INFERENCE_NETWORKS
    self.baseline = estimators.RunningMeanBaseline(decay=config.baseline_decay)
    self.tau_at = schedules.tau_schedule(config)
    self.reinforce = estimators.get("reinforce")
    self.make_optimizer = make_optimizer(config)
    # Only the optimizer's update rule is used: the hyperparameters come from its state.
    self.optimizer = self.make_optimizer(learning_rate=0.0, momentum=0.0, weight_decay=0.0)

  def model(self, params) -> nnx.Module:
    return nnx.merge(self.graphdef, params)

  def init_member(self, key, hyperparameters, seed):
    del seed
    params = nnx.to_pure_dict(nnx.state(models.build(self.config, nnx.Rngs(key))))
    if self.config.decoder_output_bias == "data_log_odds":
      last = max(params["decoder"]["layers"])
      params["decoder"]["layers"][last]["bias"] = self.output_bias
    member = {
      "params": params,
      "opt_state": self.make_optimizer(**_optimizer_hyperparameters(hyperparameters)).init(params),
      "baseline": self.baseline.init(),
      "input_mean": self.initial_input_mean,
    }
    if self.config.get("variance_ema_decay", 0.0) > 0:
      encoder = self._inference_gradients(params)
      zeros = jax.tree.map(jnp.zeros_like, encoder)
      member["grad_ema"] = {"mean": zeros, "square": zeros}
    return member

  def _reduce(self, values: jax.Array) -> jax.Array:
    """The batch's losses as the training loss takes them (``loss_reduction``: mean or sum)."""
    return jnp.sum(values) if self.config.loss_reduction == "sum" else jnp.mean(values)

  def _inference_gradients(self, grads: dict) -> dict:
    return {network: grads[network] for _, network in self.inference_networks}

  def _grad_ema(self, ema: dict, grads: dict) -> tuple[dict, jax.Array]:
    r"""The DisARM code's variance column: exponential moving averages (decay
    ``variance_ema_decay``, from 0) of the inference networks' gradient g and of g**2 over the
    training steps, and :math:`\mathrm{mean}_i(\overline{g_i^2} - \overline{g_i}^2)` over every
    component (google-research disarm's ``compute_grad_variance``; its gradient of the
    batch-summed loss over ``batch_size**2`` is this batch-mean gradient's)."""
    decay = self.config.variance_ema_decay
    gradient = self._inference_gradients(grads)
    update = lambda average, value: decay * average + (1 - decay) * value
    mean = jax.tree.map(update, ema["mean"], gradient)
    square = jax.tree.map(update, ema["square"], jax.tree.map(jnp.square, gradient))
    variance = jax.tree.map(lambda s, m: s - jnp.square(m), square, mean)
    leaves = jax.tree.leaves(variance)
    per_component = sum(jnp.sum(v) for v in leaves) / sum(v.size for v in leaves)
    return {"mean": mean, "square": square}, per_component

  def loss(self, params, x, key, baseline_mean, tau, input_mean, estimator=None):
    estimator = estimator or self.estimator
    if estimator.draws > 1:
      # <name>_x<M>: the loss at M independent draws, averaged (and so are their gradients).
      single = dataclasses.replace(estimator, draws=1)
      draws = [
        self.loss(params, x, draw_key, baseline_mean, tau, input_mean, single)
        for draw_key in jax.random.split(key, estimator.draws)
      ]
      return jax.tree.map(lambda *values: sum(values) / len(values), *draws)
    result = self.model(params).training_bound(x, key, estimator, tau, input_mean)
    bound = result.bound
    loss = -self._reduce(bound)
    objective = loss
    if estimator.score_function:
      objective = loss + self._reduce(
        estimators.score_function_surrogate(result.log_q, -bound, baseline_mean)
      )
    return objective, result

  def train_step(self, member, hyperparameters, batch, key, step):
    tau = self.tau_at(hyperparameters["tau"], step)
    x = batch.astype(jnp.float32)
    grads, result = jax.grad(self.loss, has_aux=True)(
      member["params"], x, key, member["baseline"].mean, tau, member["input_mean"]
    )
    updates, opt_state = self.optimizer.update(grads, member["opt_state"], member["params"])
    input_mean = member["input_mean"]
    if self.config.center_inputs == "running_average":
      decay = self.config.centering_decay
      input_mean = jax.tree.map(
        lambda mean, inputs: decay * mean + (1 - decay) * jnp.mean(inputs, axis=0),
        input_mean,
        result.inference_inputs,
      )
    new_member = {
      "params": optax.apply_updates(member["params"], updates),
      "opt_state": opt_state,
      "baseline": self.baseline.update(member["baseline"], -result.bound),
      "input_mean": input_mean,
    }
    metrics = {name: jnp.mean(value) for name, value in result.metrics.items()}
    if "grad_ema" in member:
      new_member["grad_ema"], metrics["ema_grad_variance"] = self._grad_ema(
        member["grad_ema"], grads
      )
    # One sign for every bound a user reads: the negative ELBO in nats, as the final NLL bounds.
    return new_member, {"neg_elbo": -jnp.mean(result.bound), **metrics, "tau": tau}

  def iwae(self, member, seed, x, evaluation, start, num_samples):
    """IWAE bounds ``[B]`` of the images ``x``: rows ``start`` ... of ``evaluation`` (an
    rng.Evaluation, or the step of a periodic one), whose samples it draws."""
    key = jax.random.fold_in(
      jax.random.fold_in(rng.member_key(seed, rng.Stream.EVALUATION), evaluation), start
    )
    return self.model(member["params"]).iwae_bound(
      x, key, num_samples, self.config.iwae_chunk_size, member["input_mean"]
    )

  def gradient_measurements(self, member, tau, seed, x, step, mse: bool):
    """log10 trace Cov of the inference networks' gradient over draws (and its MSE and squared
    bias against REINFORCE's mean, or against the exact gradient with
    ``mse_reference="exact"``) on ``x``; with several stochastic layers, each layer's network
    apart too (``log10_grad_variance_<layer>``)."""
    tau = self.tau_at(tau, step)
    key = jax.random.fold_in(rng.member_key(seed, rng.Stream.GRADIENT_STATISTICS), step)

    def stats(estimator, draws, stats_key):
      def inference_grad(draw_key):
        grads = jax.grad(self.loss, has_aux=True)(
          member["params"],
          x,
          draw_key,
          member["baseline"].mean,
          tau,
          member["input_mean"],
          estimator,
        )[0]
        return self._inference_gradients(grads)

      chunk = max(d for d in range(1, min(draws, 25) + 1) if draws % d == 0)
      return diagnostics.gradient_stats(inference_grad, stats_key, draws, chunk_size=chunk)

    ours = stats(self.estimator, self.config.variance_draws, key)
    out = {"log10_grad_variance": jnp.log10(ours.trace_variance)}
    if len(self.inference_networks) > 1:
      for layer, network in self.inference_networks:
        trace = sum(jnp.sum(v) for v in jax.tree.leaves(ours.variance[network]))
        out[f"log10_grad_variance_{layer}"] = jnp.log10(trace)
    if mse and self.config.get("mse_reference", "reinforce") == "exact":
      # The exact gradient of the expected bound, by enumeration (model "categorical").
      exact = jax.grad(lambda p: -self._reduce(self.model(p).exact_bound(x, member["input_mean"])))(
        member["params"]
      )
      reference = self._inference_gradients(exact)
      out["log10_grad_mse"] = jnp.log10(ours.mse(reference))
      out["log10_grad_squared_bias"] = jnp.log10(ours.squared_bias(reference))
    elif mse:
      # The paper's Figure 2b: MSE against a high-sample REINFORCE reference.
      ref = stats(self.reinforce, self.config.mse_reference_draws, jax.random.fold_in(key, 1))
      out["log10_grad_mse"] = jnp.log10(ours.mse(ref.mean, ref.trace_variance / ref.num_draws))
      out["log10_grad_squared_bias"] = jnp.log10(
        ours.squared_bias(ref.mean, ref.trace_variance / ref.num_draws)
      )
    return out
