"""The one loader for the real measurements in ../shared/data/external (tests and notebooks only).

Each loader skips the calling test with a clear reason when the folder is absent; the package itself never
depends on these files.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(os.environ.get("CAMEL_SHARED", Path(__file__).resolve().parents[1].parent / "shared")) / "data" / "external"


def path(dataset: str) -> Path:
    """Folder of one external data set; skips the test (or raises FileNotFoundError outside pytest) if absent."""
    folder = ROOT / dataset
    if not folder.is_dir():
        reason = f"external data set {dataset!r} not found at {folder} (set CAMEL_SHARED to the shared/ folder)"
        try:
            import pytest
        except ImportError:  # pragma: no cover
            raise FileNotFoundError(reason) from None
        pytest.skip(reason)
    return folder


def epoch_chinchilla() -> pd.DataFrame:
    """Epoch AI's Chinchilla points as Epoch fit them: the 5 highest losses dropped (240 rows), D = C / (6N)."""
    df = pd.read_csv(path("epoch_chinchilla") / "svg_extracted_data.csv")
    df = df[df["loss"] < np.sort(df["loss"].to_numpy())[-5]]
    return pd.DataFrame(
        {
            "N": df["Model Size"].to_numpy(float),
            "D": df["Training FLOP"].to_numpy(float) / (6 * df["Model Size"].to_numpy(float)),
            "loss": df["loss"].to_numpy(float),
        }
    )


def gadre2024() -> pd.DataFrame:
    return pd.read_csv(path("gadre2024") / "models.csv")


def dmsl_shukor2025() -> pd.DataFrame:
    return pd.read_csv(path("dmsl_shukor2025") / "dmsl_llm_slimpajama.csv")


def mixinglaws_ye2024(name: str = "5Mix") -> pd.DataFrame:
    return pd.read_csv(path("mixinglaws_ye2024") / f"{name}_long.csv")
