"""Power-aware training: pick the GPU frequency and the batch size together under a power cap.

Implements "Accelerated Training on Low-Power Edge Devices": profile time per sample and peak power
per (batch size, GPU frequency) of a device (``profile``, into a campaign), estimate each batch
size's samples-to-accuracy ratio on an offline proxy (``ratios``, ``data``), keep both in a versioned
table (``table``), and choose the pair that minimises time-to-accuracy under a cap (``select``; stdlib
core in ``thor_sdk.runtime.table``). ``replay`` checks the selection against real GPU training traces,
``train`` fine-tunes under the cap, and ``remote`` runs profiling or training on a Jetson over ssh.
Devices bring the frequency control and the power meter (``thor_sdk.devices``: the Jetson, the
SIMULATED Jetson); the library API is ``thor_sdk.table_profile`` ... ``thor_sdk.replay``
(``thor_sdk.api``). Heavy imports (numpy, torch, sklearn) happen inside functions.
"""
