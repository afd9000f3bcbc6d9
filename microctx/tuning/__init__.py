"""Tuning on train/tune without looking at test: sweeps over a candidate's parameters (`sweep`),
and the one evaluation of the chosen configuration on test (`evaluate`).
"""
