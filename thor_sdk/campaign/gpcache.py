"""The campaign's working cost models: one fitted ``KindGP`` per kind, refitted only when that kind gets new samples."""

from collections import Counter

from thor_sdk.layers.kinds import entry_key, feature_vector, model_key


class GPCache:
    """One fitted ``KindGP`` per kind (and structural variant) of one metric, refitted only when that kind's sample count changes."""

    def __init__(self, metric="time", random_state=0, extra_log_var=0.0):
        self.metric = metric
        self.random_state = random_state
        self.extra_log_var = extra_log_var
        self.gps = {}
        self._n = {}

    def update(self, samples):
        from thor_sdk.fitting.pipeline import fit_kinds

        rows = [s for s in samples if s["metric"] == self.metric and not s["flagged"]]
        self.gps.update(fit_kinds(rows, self.random_state, self.extra_log_var, n_restarts_optimizer=0,
                                  unchanged=lambda kind, rs: self._n.get(kind) == len(rs)))
        # each model's count now
        self._n.update(Counter(model_key(s["kind"], s["config"], s["batch_size"]) for s in rows))
        return self

    def predict(self, probe):
        """(mean, std) of a probe's layer cost, or None while its kind has no model."""
        from thor_sdk.fitting.pipeline import sample_terms

        # a variant without samples yet: its kind's model, as an estimator falls back
        gp = self.gps.get(entry_key(probe.kind, probe.config, probe.batch_size, self.gps))
        if gp is None:
            return None
        p = {"kind": probe.kind, "config": probe.config, "batch_size": probe.batch_size, "role": probe.role}
        mean, std = gp.predict([feature_vector(probe.kind, probe.config, probe.batch_size, probe.role)],
                               terms=sample_terms([p]), return_std=True)
        return float(mean[0]), float(std[0])
