"""Unsupervised parsing on the ListOps subset of sequences of length L <= 10 (Table 1).

Expected: at tau 0.01 and learning rate 0.1, GR-MC10 reaches 67.7 % test accuracy over 5 seeds in
10 epochs (76 min on the 2-core CPU; records/table1_L10_tau0.01_cpu_gr_mc10_lr0.1_members.md), and
every ST-GS member of the learning-rate grid diverges (one NVIDIA H100; the Table 1 study,
configs/studies/table1.py). The defaults (tau 0.1, learning rate 0.5) are not measured as one run.
"""

from configs.listops_common import listops_config


def get_config():
  return listops_config(max_length=10)
