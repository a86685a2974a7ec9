"""Unsupervised parsing on the ListOps subset of sequences of length L <= 50."""

from configs.listops_common import listops_config


def get_config():
  return listops_config(max_length=50)
