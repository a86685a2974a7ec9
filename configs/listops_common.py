"""Shared defaults of the ListOps configs (listops_L10.py, listops_L25.py, listops_L50.py)."""

import ml_collections

from configs.population import population_config


def listops_config(max_length: int) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.experiment = "listops"
  # Data: test_d20s.tsv and the validation file in data_dir; training data is
  # generated (num_train_examples, data_seed) and cached unless train_file is set.
  config.dataset = "listops"  # or "synthetic" (tests)
  config.data_dir = ""
  config.test_file = "test_d20s.tsv"
  config.valid_file = "valid_d20s_1k.tsv"
  config.train_file = ""
  # Lines generated before the length filter: 10,000 keep 4,169 at L <= 10 (the log says how
  # many are kept); the paper's training file had ~90,000.
  config.num_train_examples = 90_000
  config.data_seed = 0
  config.cache_dir = "~/.cache/gr_jax/listops"
  config.max_length = max_length  # the L <= max_length subset
  # Model (the basic Gumbel Tree-LSTM).
  config.embed_dim = 128
  config.hidden_dim = 128
  config.classifier_hidden_dim = 128
  # Initialization: Choi et al.'s code (gr_jax/models/tree_lstm.py says where each is from);
  # configs/listops_flax_init.py is the earlier one (Flax's defaults, orthogonal composition).
  config.embed_init = "normal_0.01"
  config.leaf_init = "kaiming_normal"
  config.compose_init = "kaiming_normal"
  config.classifier_init = "kaiming_normal"
  config.output_init = "uniform_0.002"
  # Estimator of the merge decisions: a straight-through one
  # (gr_jax.estimators.name_patterns(straight_through=True)).
  config.estimator = "gr_mc10"
  config.tau = 0.1
  # Temperature schedule: "constant", or "exponential" decay to a floor,
  # tau_t = max(tau_min, tau * exp(-tau_decay_rate * t)), updated every tau_decay_every steps.
  config.tau_schedule = "constant"
  config.tau_min = 0.1
  config.tau_decay_rate = 1e-4
  config.tau_decay_every = 500
  # Plain SGD, no momentum; batch size = L.
  config.batch_size = max_length
  config.learning_rate = 0.5
  config.weight_decay = 1e-4
  # The paper's protocol has no clipping; global-norm clipping (as Choi et al.'s
  # ListOps training, e.g. 5.0) is an opt-in departure from it.
  config.grad_clip_norm = 0.0
  config.num_epochs = 10
  config.seed = 0
  # Runs trained together in one program (experiments/population.py): seeds and
  # hyperparameter searches ("paper": the learning-rate grid times seeds).
  config.population = population_config()
  config.steps_per_call = 500
  config.log_every = 500
  config.checkpoint_every = 2_000
  config.eval_batch_size = 200
  return config
