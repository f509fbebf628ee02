"""The memory rules of thumb of Chapter 1 (labs.basics.memory)."""

from __future__ import annotations

import pytest

from labs.basics import memory


def test_training_regimes_both_total_16_bytes_per_param_with_different_parts():
    fp32, mixed = memory.training_bytes(1, "fp32"), memory.training_bytes(1, "mixed")
    assert fp32 == {"weights": 4, "gradients": 4, "optimizer": 8, "total": 16}
    assert mixed == {"weights": 2, "gradients": 2, "optimizer": 12, "total": 16}
    assert memory.training_bytes(7e9)["total"] == pytest.approx(112e9)


def test_inference_bytes_per_format():
    assert memory.inference_bytes(6.74e9, "fp16") == pytest.approx(13.48e9)
    assert memory.inference_bytes(1e9, "int8") == 1e9
    assert memory.inference_bytes(1e9, "nf4") == 0.5e9


def test_kv_cache_llama2_7b_is_half_a_mebibyte_per_token():
    spec = memory.MODELS["Llama-2-7B"]
    assert spec.kv_bytes_per_token("fp16") == 2 * 32 * 32 * 128 * 2 == 0.5 * 2**20
    assert memory.kv_cache_bytes(32, 32, 128, tokens=4096) == 2 * 2**30


def test_gqa_divides_the_cache_by_the_group_size():
    llama70 = memory.MODELS["Llama-2-70B"]
    assert llama70.kv_bytes_per_token() * 8 == memory.kv_cache_bytes(80, 64, 128, 1)


def test_gpus_needed_rounds_up_with_headroom():
    assert memory.gpus_needed(72e9, 80e9) == 1
    assert memory.gpus_needed(72.1e9, 80e9) == 2
    assert memory.gpus_needed(112e9, 80e9) == 2
    assert memory.gpus_needed(0, 80e9) == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: memory.bytes_per_param("fp12"), "unknown dtype 'fp12'"),
        (lambda: memory.training_bytes(1, "fp64"), "unknown regime"),
        (lambda: memory.kv_cache_bytes(0, 1, 1, 1), "n_layers must be positive"),
        (lambda: memory.inference_bytes(-1), "n_params must be >= 0"),
        (lambda: memory.gpus_needed(1, 0), "gpu_bytes > 0"),
    ],
)
def test_bad_input_is_rejected_with_a_reason(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_format_bytes():
    assert memory.format_bytes(13.48e9) == "13.5 GB"
    assert memory.format_bytes(2**29, binary=True) == "512 MiB"
    assert memory.format_bytes(12) == "12 B"
