"""Power-aware training: pick the GPU frequency and the batch size together under a power cap.

Implements "Accelerated Training on Low-Power Edge Devices": profile time per sample and peak power
per (batch size, GPU frequency) (``profile``), estimate each batch size's samples-to-accuracy ratio on
an offline proxy (``ratios``), keep both in a versioned table (``table``), and choose the pair that
minimises time-to-accuracy under a cap (``select``; stdlib core in ``thor_sdk.runtime.table``).
``replay`` checks the selection against real GPU training traces, ``devfreq`` sets Jetson GPU
frequencies (always restored), ``simjetson`` writes a SIMULATED Jetson sysfs tree for tests and demos,
and ``train`` fine-tunes under the cap. Heavy imports (numpy, torch, sklearn) happen inside functions.
"""
