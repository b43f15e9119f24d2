"""Show that the perturbed numeric environment really computes different floats on this machine.

    python -m tools.numeric_paths            # prints what differs; exit 1 if nothing does
    python -m tools.numeric_paths --env      # prints the settings, for: env $(...) pytest notebooks

CI runs strict nbval a second time under ``PERTURBED_ENV`` (other CPU kernels for ATen and MKL, one thread), so
that an output which depends on the last bits of a float fails in CI rather than on a learner's machine with
another CPU. That second run proves something only if the environment changes the floats here; this script
computes a few typical operations in a fresh interpreter under the native and the perturbed environment and
compares the results bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PERTURBED_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "OMP_NUM_THREADS": "1"}

_PROBE = """
import hashlib, json, torch
torch.manual_seed(0)
a, b = torch.randn(67, 131), torch.randn(131, 29)
x = torch.randn(8, 37, 64)
ops = {
    "matmul": a @ b,
    "softmax": torch.softmax(x * 3.0, dim=-1),
    "layer_norm": torch.nn.functional.layer_norm(x, (64,)),
    "exp_sum": x.exp().sum(dim=-1),
    "gelu": torch.nn.functional.gelu(x),
}
print(json.dumps({k: hashlib.sha256(v.contiguous().numpy().tobytes()).hexdigest() for k, v in ops.items()}))
"""


def _digests(extra_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PERTURBED_ENV}
    env.update(extra_env)
    result = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    if sys.argv[1:] == ["--env"]:
        print(" ".join(f"{k}={v}" for k, v in PERTURBED_ENV.items()))
        return 0
    native, perturbed = _digests({}), _digests(PERTURBED_ENV)
    changed = sorted(name for name in native if native[name] != perturbed[name])
    settings = " ".join(f"{k}={v}" for k, v in PERTURBED_ENV.items())
    print(f"under {settings}: {len(changed)} of {len(native)} operations give other bits ({', '.join(changed)})")
    if not changed:
        print("the perturbed environment changes no floats on this machine: its nbval run would prove nothing")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
