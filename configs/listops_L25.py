"""Unsupervised parsing on the ListOps subset of sequences of length L <= 25 (Table 1).

Expected: not measured here (the paper: GR-MC10 60.8 % at tau 0.1).
"""

from configs.listops_common import listops_config


def get_config():
  return listops_config(max_length=25)
