"""Fitting: per-kind cost models (mean function + sparse GP), the estimator file writer, the samples CSV reader."""
