"""ListOps with the earlier initialization (rounds 1-2): Flax's defaults for the embeddings
(std ~ 1/sqrt(128)), the leaf projection and the classifier (lecun-normal), an orthogonal
composition layer.

``--config=configs/listops_flax_init.py:10`` (L after the colon; 10 by default).
"""

from configs.listops_common import listops_config


def get_config(max_length: str = "10"):
  config = listops_config(max_length=int(max_length))
  config.embed_init = "flax_embed"
  config.leaf_init = "lecun_normal"
  config.compose_init = "orthogonal"
  config.classifier_init = "lecun_normal"
  config.output_init = "lecun_normal"
  return config
