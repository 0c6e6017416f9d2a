"""Whether an attention module dispatches through transformers' attention registry, and which eager
function it falls back to, read from what transformers exposes (the registry's type, the names the
compiled forward loads, the registry's calling convention), not from a regex over the source
(attention_plasticity.capture._dispatch_default; issue 26 item 3).

Run: .venv/bin/python -m pytest -q tests/python/test_capture_dispatch.py
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface  # noqa: E402

from attention_plasticity import capture  # noqa: E402

# A module as a model's code generator (or a notebook, or a frozen application) makes it: no
# source file behind it, so inspect.getsource fails.
GENERATED = '''
def eager_attention_forward(module, query, key, value, attention_mask, scaling=1.0, **kwargs):
    return query, None

def helper(x):
    return x

class GeneratedAttention(torch.nn.Module):
    def forward(self, query, key, value, attention_mask):
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation,
                                                          eager_attention_forward)
        return attention(self, helper(query), key, value, attention_mask)
'''


def generated():
    scope = {"torch": torch, "ALL_ATTENTION_FUNCTIONS": ALL_ATTENTION_FUNCTIONS}
    exec(compile(GENERATED, "<generated attention>", "exec"), scope)
    return scope


def test_a_module_without_source_that_dispatches_is_found():
    scope = generated()
    assert capture._dispatch_default(scope["GeneratedAttention"]) is scope["eager_attention_forward"]


def test_a_module_that_only_mentions_the_registry_does_not_dispatch():
    class Talks(torch.nn.Module):
        def forward(self, x):
            """Unlike ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager)
            in a transformers model, this module computes its attention itself."""
            return x

    assert capture._dispatch_default(Talks) is None
    assert capture._dispatch_default(torch.nn.Linear) is None


def test_a_model_registry_of_its_own_is_a_registry():
    """A model's own AttentionInterface (as Doge's) shares the mapping the capture registers in."""
    scope = generated()
    scope["ALL_ATTENTION_FUNCTIONS"] = AttentionInterface()
    assert capture._dispatch_default(scope["GeneratedAttention"]) is scope["eager_attention_forward"]


def test_transformers_models_dispatch_with_their_eager_function():
    from transformers.models.bert import modeling_bert
    from transformers.models.llama import modeling_llama
    assert capture._dispatch_default(modeling_llama.LlamaAttention) is modeling_llama.eager_attention_forward
    assert capture._dispatch_default(modeling_bert.BertSelfAttention) is modeling_bert.eager_attention_forward
    assert capture._dispatch_default(modeling_llama.LlamaMLP) is None
