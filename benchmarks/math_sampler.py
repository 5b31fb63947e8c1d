"""Sampling throughput of the math task: the batched group sampler (``tasks.lm_sampling.sample_groups``) vs
``transformers``' ``model.generate(..., num_return_sequences=G)`` on the same model, prompts, batch, lengths,
dtype, sampling settings and machine, in tokens sampled per second (EOS tokens counted, padding not).

    python benchmarks/math_sampler.py --config configs/math/sampler.yaml   # SmolLM2-135M, 4 problems x 8 x 96 tokens
    python benchmarks/math_sampler.py --quick                              # a tiny random LM, under a minute

The two run back to back, alternating (A B A B ...), and each side's fastest repeat is kept: on a machine shared
with other jobs the ratio inside one run is what to read; the absolute tokens/s move with the load. Each repeat also
records the process's CPU time (``tokens_per_cpu_s``, ``cpu_ratio``): with one thread it moves much less with other
jobs' load than the wall clock does.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

#: The headline-page row these figures belong to (the math task's).
CAPABILITY = "Math word problems with RLOO (ad generate math)"


def prompts(tokenizer, count: int) -> list[list[int]]:
    """Token ids of the first ``count`` training problems of seed 0 (level 1), rendered as the task renders them."""
    from tasks.math.problems import generate_problems, split_templates
    from tasks.math.prompts import render_prompt

    train, _ = split_templates(0, 0.25)
    return [tokenizer(render_prompt(tokenizer, p.question))["input_ids"] for p in generate_problems(train, 1, count)]


def run_generate(model, tokenizer, ids, g, new, temperature, top_p, eos, seed) -> int:
    """Tokens ``model.generate`` sampled (each row up to its first EOS)."""
    import torch

    from tasks.lm_sampling import left_pad

    x, mask, _ = left_pad(ids, tokenizer.pad_token_id)
    torch.manual_seed(seed)
    out = model.generate(input_ids=x, attention_mask=mask, do_sample=True, temperature=temperature, top_p=top_p,
                         top_k=0, max_new_tokens=new, num_return_sequences=g, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=sorted(eos))
    total = 0
    for row in out[:, x.size(1):].tolist():
        total += next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
    return total


def run_ours(model, tokenizer, ids, g, new, temperature, top_p, eos, seed) -> int:
    """Tokens the group sampler sampled."""
    import torch

    from tasks.lm_sampling import sample_groups

    samples = sample_groups(model, ids, g, new, eos_ids=eos, pad_id=tokenizer.pad_token_id, temperature=temperature,
                            top_p=top_p, generator=torch.Generator().manual_seed(seed))
    return sum(len(t) for t in samples.tokens)  # EOS tokens included


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny random LM, small sizes (under a minute)")
    parser.add_argument("--model", default="smollm2-135m", help="base LM (ad.lm.pretrained.load_base name or folder)")
    parser.add_argument("--problems", type=int, default=4, help="distinct prompts")
    parser.add_argument("--num-generations", type=int, default=8, help="samples per prompt (batch = problems x this)")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
                        help="weights (auto: bfloat16 where the CPU multiplies it in hardware, else float32)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats of each side")
    parser.add_argument("--threads", type=int, default=2)
    args = parse_args(parser)
    import torch

    from ad.config.groups import cpu_has_fast_bfloat16
    from ad.lm.pretrained import load_base
    from benchmarks.common import resolve_dtype
    from tasks.math.reinforce import eos_ids

    torch.set_num_threads(args.threads)
    if args.quick:
        from benchmarks.helpers.tiny_lm import build_tiny

        args.model = str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", n_layer=2, width=64))
        args.max_new_tokens, args.repeats = min(args.max_new_tokens, 32), min(args.repeats, 2)
    dtype = resolve_dtype(args.dtype)
    model, tokenizer = load_base(args.model, str(dtype).removeprefix("torch."))
    model.eval()
    ids = prompts(tokenizer, args.problems)
    eos = eos_ids(model, tokenizer)
    setting = (ids, args.num_generations, args.max_new_tokens, args.temperature, args.top_p, eos)
    load_before = os.getloadavg()[0]
    sides = {"ours": [], "generate": []}
    for repeat in range(args.repeats):
        for name, fn in (("generate", run_generate), ("ours", run_ours)):
            start, cpu = time.perf_counter(), time.process_time()
            with torch.no_grad():
                tokens = fn(model, tokenizer, *setting, seed=repeat)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            sides[name].append({"tokens": tokens, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
                                "tokens_per_s": tokens / seconds, "tokens_per_cpu_s": tokens / cpu})
            print(f"repeat {repeat} {name}: {tokens} tokens in {seconds:.1f}s ({cpu:.1f} CPU-s) = "
                  f"{tokens / seconds:.1f} tokens/s, {tokens / cpu:.1f} tokens/CPU-s", flush=True)
    best = {k: max(r["tokens_per_s"] for r in v) for k, v in sides.items()}
    best_cpu = {k: max(r["tokens_per_cpu_s"] for r in v) for k, v in sides.items()}
    batch = args.problems * args.num_generations
    fig = figure(f"math sampling throughput, {batch} solutions ({args.problems} prompts x {args.num_generations}) x "
                 f"<= {args.max_new_tokens} new tokens, temperature {args.temperature}: group sampler vs "
                 "transformers generate", "tokens/s", best["ours"], best["generate"], "ratio >= 2")
    fig.update(tokens_per_cpu_s=best_cpu, cpu_ratio=best_cpu["ours"] / best_cpu["generate"],
               dtype=str(dtype).removeprefix("torch."), threads=args.threads, repeats=sides,
               cpu_capability=torch.backends.cpu.get_cpu_capability(), cpu_fast_bfloat16=cpu_has_fast_bfloat16(),
               prompt_tokens=[len(i) for i in ids], model=Path(args.model).name if args.quick else args.model,
               load_average_before=round(load_before, 2),
               note="alternating repeats, fastest of each side; load_average_before: the machine's 1-minute load "
                    "average when the run started (other jobs sharing the CPU move the absolute tokens/s)")
    report("math_sampler", [fig], quick=args.quick, page="math",
           capability=CAPABILITY)


if __name__ == "__main__":
    main()
