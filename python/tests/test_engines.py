"""Descriptor helpers from engine settings."""

import unittest

import _support  # noqa: F401
from strata_client import Descriptor
from strata_client.engines import engine_descriptor, model_geometry, sglang_descriptor, vllm_descriptor
from types import SimpleNamespace as HiCacheStorageConfig  # the attributes sglang_descriptor reads (SGLang itself is not needed here)

LLAMA3_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}
DEEPSEEK_V3 = {"num_hidden_layers": 61, "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
               "qk_nope_head_dim": 128}


class EngineDescriptorTest(unittest.TestCase):
    def test_geometry(self):
        self.assertEqual(model_geometry(LLAMA3_8B), {"num_layers": 32, "attention_heads": 32, "num_kv_heads": 8,
                                                     "head_dim": 128, "attention_head_dim": 128})
        self.assertEqual(model_geometry(DEEPSEEK_V3)["mla_latent_dim"], 576)

    def test_vllm_matches_readme_descriptor(self):
        d = vllm_descriptor(tenant="acme", model="meta-llama/Meta-Llama-3-8B-Instruct", model_revision="rev-1",
                            block_size=16, dtype="torch.bfloat16", kv_cache_dtype="auto", hf_config=LLAMA3_8B,
                            tokenizer_revision="rev-1", kv_format_version=1, params=8030261248)
        self.assertEqual(d.id.hex(), "06027685b9254d3aa1c9d0bafafbcb360b871fe0a06d4feaf60915cc6cfcf79e")
        self.assertEqual(d.page_size(), 2 << 20)

    def test_tp_ranks_and_mla(self):
        base = dict(tenant="t", model="m", engine="sglang", page_tokens=64, dtype="bf16")
        r0 = engine_descriptor(tp_size=2, tp_rank=0, hf_config=LLAMA3_8B, **base)
        r1 = engine_descriptor(tp_size=2, tp_rank=1, hf_config=LLAMA3_8B, **base)
        self.assertNotEqual(r0.id, r1.id)
        self.assertEqual(r0.fork_key(), r1.fork_key())
        self.assertEqual(r0.page_size(), 2 * 32 * 4 * 128 * 2 * 64)
        # MLA omits TP: every TP rank shares one namespace.
        m0 = engine_descriptor(tp_size=8, tp_rank=0, hf_config=DEEPSEEK_V3, **base)
        m5 = engine_descriptor(tp_size=8, tp_rank=5, hf_config=DEEPSEEK_V3, **base)
        self.assertEqual(m0.id, m5.id)
        self.assertEqual(m0.page_size(), 61 * 576 * 2 * 64)
        m0.validate()

    def test_local_model_path_is_stable(self):
        a = vllm_descriptor(tenant="t", model="/mnt/a/meta-llama/Llama-3-8B", block_size=16, dtype="bf16", hf_config=LLAMA3_8B)
        b = vllm_descriptor(tenant="t", model="/models/meta-llama/Llama-3-8B/", block_size=16, dtype="bf16", hf_config=LLAMA3_8B)
        self.assertEqual(a.model, "meta-llama/Llama-3-8B")
        self.assertEqual(a.id, b.id)

    def test_sglang_from_storage_config(self):
        class Pool:
            page_size, dtype, layout, layer_num, head_num, head_dim = 64, "torch.float16", "page_first", 28, 2, 128

        sc = HiCacheStorageConfig(tp_rank=1, tp_size=4, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                  is_mla_model=False, model_name="Qwen/Qwen3-0.6B")
        d = sglang_descriptor(sc, Pool(), tenant="acme", page_bytes=123456)
        self.assertEqual((d.model, d.engine, d.tp_size, d.tp_rank, d.dtype, d.layout, d.page_tokens, d.page_bytes),
                         ("Qwen/Qwen3-0.6B", "sglang", 4, 1, "fp16", "page_first", 64, 123456))
        self.assertEqual(d.extra["host_layer_num"], "28")
        d.validate()
        sc.is_mla_model = True
        m = sglang_descriptor(sc, Pool(), tenant="acme", page_bytes=1000)
        self.assertEqual((m.tp_size, m.tp_rank), (1, 0))
        self.assertIsInstance(m, Descriptor)


if __name__ == "__main__":
    unittest.main()
