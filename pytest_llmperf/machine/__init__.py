"""What the machine and its cards say about themselves, and whether a measurement had them to
itself.

- `hardware`: which machine this is (a chain of detectors) and the fingerprint results carry.
- `clocks`: the clocks and power limit an administrator set, read once per recorded run.
- `neighbours`: the CPU time of other processes and the hypervisor's steal, from /proc.
- `gpu_state`: the engine's cards sampled through NVML over a measurement.
- `disturbance`: the rule that calls a measurement DISTURBED, from what the two above saw.
- `watch`: one measurement watched by all of them.

May import: the standard library and NVML (inside functions). Nothing of the project outside
this folder: every other layer may ask the machine, and the machine asks no one
(pyproject.toml's import-linter layers keep it at the bottom).
"""
