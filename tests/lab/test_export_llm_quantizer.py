"""examples/et_llm/export_llm_debug.py gives export_llm a 16a8w QnnQuantizer its 1.5.1 menu lacks
(docs/etllama.md): for qnn_16a8w the quantizer ExecuTorch's SmolLM2 recipe uses, every other format
export_llm's own. No export, no lowering: the quantizers' configs are compared."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "et_llm" / "export_llm_debug.py"


@pytest.fixture(scope="module")
def wrapper() -> types.ModuleType:
    for name in ("executorch", "torchao"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed: pip install 'harness[qnn]'")
    spec = importlib.util.spec_from_file_location("export_llm_debug_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(quantizer: Any) -> tuple[object, ...]:
    """What decides the quantization: the default config's dtype, granularity and observers."""
    cfg = quantizer.default_quant_config
    return (cfg.quant_dtype, cfg.is_qat, cfg.is_conv_per_channel, cfg.is_linear_per_channel,
            cfg.is_embedding_per_channel, cfg.act_observer, tuple(quantizer.custom_quant_annotations))


def test_qnn_16a8w_is_taken_aside_from_hydra_and_the_rest_passes_unchanged(wrapper: types.ModuleType) -> None:
    args = ["backend.qnn.soc_model=SM8650", "quantization.pt2e_quantize=qnn_16a8w", "hydra.run.dir=."]
    rest, extra = wrapper.take_extra_format(args)
    assert rest == ["backend.qnn.soc_model=SM8650", "quantization.pt2e_quantize=null", "hydra.run.dir=."]
    assert extra is not None and extra.value == "qnn_16a8w"
    for fmt in ("qnn_16a4w", "qnn_8a8w", "qnn_16a16w"):
        assert wrapper.take_extra_format([f"quantization.pt2e_quantize={fmt}"]) == ([f"quantization.pt2e_quantize={fmt}"], None)


def test_16a8w_is_qnn_quantizer_at_use_16a8w_and_the_menu_formats_are_export_llms(
        wrapper: types.ModuleType) -> None:
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from executorch.extension.llm.export import quantizer_lib
    from torchao.quantization.pt2e import MinMaxObserver

    lib = types.SimpleNamespace(get_qnn_quantizer=quantizer_lib.get_qnn_quantizer)  # export_llama_lib's name
    wrapper.give_16a8w_quantizer(lib)
    quantizer, dtype = lib.get_qnn_quantizer("qnn_16a8w", None)
    assert isinstance(quantizer, QnnQuantizer) and dtype == QuantDtype.use_16a8w
    assert _config(quantizer) == (QuantDtype.use_16a8w, False, True, True, False, MinMaxObserver, ())
    for fmt in ("qnn_16a4w", "qnn_8a8w"):
        ours, our_dtype = lib.get_qnn_quantizer(fmt, None)
        theirs, their_dtype = quantizer_lib.get_qnn_quantizer(fmt, None)
        assert (our_dtype, _config(ours)) == (their_dtype, _config(theirs)), fmt
    with pytest.raises(SystemExit, match="post-training"):
        lib.get_qnn_quantizer("qnn_16a8w", "8da4w")
