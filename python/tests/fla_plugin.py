"""A pytest plugin that runs FLA's own tests of chunk_gated_delta_rule
against gdn's: the test file as FLA ships it, with only the function under
test swapped.

    cd FLA && PYTHONPATH=.:GDN/python:GDN/python/tests \\
        python3 -m pytest -p fla_plugin tests/ops/test_gdn.py -k test_chunk

(FLA: a checkout of flash-linear-attention holding fla/ and tests/; GDN:
this repository. scripts/device-run.sh's flatests step runs it.)

What is swapped: every collected test module's global
chunk_gated_delta_rule becomes a function with FLA's signature whose
forward is gdn.chunk_gated_delta_rule. FLA's tests also call backward on
its outputs, and gdn has no backward, so the gradient is FLA's: the
original function run again on the same inputs and differentiated. The
forward checks (o and ht against FLA's naive recurrence, or against the
same call with the option done outside the kernel) test gdn; the gradient
checks test FLA's backward at gdn's outputs' inputs, as they would without
the swap.

Where FLA's backward refuses to run (FLA 0.5.1 raises a RuntimeError on
Hopper with Triton 3.4 or later unless tilelang is installed, FLA alone
included), the gradient is that of FLA's naive recurrence instead
(naive_recurrent_gated_delta_rule, the tests' own reference, with the
call's options applied outside it): the test then reaches its forward
checks, which are the ones that test gdn, and its gradient checks compare
FLA's reference with itself. Such cases are counted in the summary, with
FLA's message.

A case whose head dimension is not 128 is skipped, saying so: gdn's
kernels are built for the head dimension of Qwen3-Next and Qwen3.5. Any
other refusal by gdn fails the case. Each failed check of FLA's
assert_close is printed as it happens (the case, the check's name, FLA's
message with its error ratio), so that a run cut short still tells which
checks failed, forward (o, ht) or gradient (d...); the summary at the end
counts the cases run, passed, skipped and failed.

A run of the same cases without this plugin is FLA on its own: the control
for the gradient checks (scripts/device-run.sh's flatests step runs both).
"""
import inspect
import os

import pytest
import torch
import torch.nn.functional as F

import gdn

HEAD_DIM = 128
_GDN_PARAMS = set(inspect.signature(gdn.chunk_gated_delta_rule).parameters)
_counts = {"swapped_calls": 0}
_failed_checks = {}  # test id -> FLA's messages of its failed assert_close checks
_beside_fla = {}  # test id -> gdn's o and ht against FLA's forward on the same call, per call
_current = {"id": None}
_naive_grads = {}  # test id -> FLA's message where its backward refused (the naive recurrence's gradient used)


def _naive_fla(call):
    """chunk_gated_delta_rule's forward as FLA's own reference computes it:
    naive_recurrent_gated_delta_rule, with the call's options applied
    outside (q and k normalised and repeated over the value heads, beta
    from its logits, the gate from A_log and dt_bias, the state's layout,
    one sequence of cu_seqlens at a time). Differentiable: the gradient
    where FLA's backward refuses to run."""
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

    q, k, v, g, beta = (call[n] for n in ("q", "k", "v", "g", "beta"))
    if call.get("use_qk_l2norm_in_kernel"):
        q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
    group = v.shape[2] // q.shape[2]
    if group > 1:  # as FLA's tests repeat them: 'b t h d -> b t (h g) d'
        q, k = q.repeat_interleave(group, dim=2), k.repeat_interleave(group, dim=2)
    if call.get("use_beta_sigmoid_in_kernel"):
        beta = beta.float().sigmoid() * (2.0 if call.get("allow_neg_eigval") else 1.0)
    if call.get("use_gate_in_kernel"):
        a = g.float()
        if call.get("dt_bias") is not None:
            a = a + call["dt_bias"].float()
        g = -call["A_log"].float().exp() * F.softplus(a)
    h0, v_first = call.get("initial_state"), call.get("state_v_first")
    if h0 is not None and v_first:
        h0 = h0.transpose(-1, -2)
    cu = call.get("cu_seqlens")
    if cu is None:
        runs = [((q, k, v, beta, g), h0)]
    else:
        bounds = cu.tolist()
        runs = [(tuple(x[:, b:e] for x in (q, k, v, beta, g)), None if h0 is None else h0[n:n + 1])
                for n, (b, e) in enumerate(zip(bounds[:-1], bounds[1:]))]
    outs = [naive_recurrent_gated_delta_rule(q=x[0], k=x[1], v=x[2], beta=x[3], g=x[4], scale=call.get("scale"),
                                             initial_state=init, output_final_state=True) for x, init in runs]
    o = torch.cat([o for o, _ in outs], dim=1).to(v.dtype)
    ht = torch.cat([h for _, h in outs], dim=0)
    if v_first:
        ht = ht.transpose(-1, -2)
    return o, (ht if call.get("output_final_state") else None)


def _swap(fla_fn):
    fla_sig = inspect.signature(fla_fn)

    def chunk_gated_delta_rule(*args, **kwargs):
        bound = fla_sig.bind(*args, **kwargs)
        call = dict(bound.arguments)
        call.update(call.pop("kwargs", {}))
        unknown = sorted(n for n, v in call.items() if n not in _GDN_PARAMS and v is not None)
        if unknown:
            raise TypeError(f"gdn's chunk_gated_delta_rule has no argument {', '.join(unknown)}")
        D = call["q"].shape[-1]
        if D != HEAD_DIM:
            pytest.skip(f"head dimension {D}: gdn's kernels take {HEAD_DIM}")
        _counts["swapped_calls"] += 1
        names = [n for n, v in call.items() if torch.is_tensor(v)]
        _note_beside_fla(fla_fn, call)
        if not torch.is_grad_enabled() or not any(call[n].requires_grad for n in names):
            return gdn.chunk_gated_delta_rule(**call)

        class Swapped(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *tensors):
                ctx.save_for_backward(*tensors)
                with torch.no_grad():
                    o, ht = gdn.chunk_gated_delta_rule(**{**call, **dict(zip(names, tensors))})
                return (o, ht) if ht is not None else o

            @staticmethod
            def backward(ctx, *grads):
                need = ctx.needs_input_grad
                xs = [t.detach().requires_grad_(n) for t, n in zip(ctx.saved_tensors, need)]
                wanted = [x for x, n in zip(xs, need) if n]
                args = {**call, **dict(zip(names, xs))}

                def grad_of(outs):
                    pairs = [(o, g) for o, g in zip(outs, grads) if o is not None and g is not None]
                    return torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                               allow_unused=True)

                try:
                    with torch.enable_grad():
                        got = grad_of(fla_fn(**args))
                except RuntimeError as e:  # FLA's backward refused (the module's docstring)
                    _naive_grads.setdefault(_current["id"], (str(e).strip().splitlines() or ["RuntimeError"])[0])
                    with torch.enable_grad():
                        got = grad_of(_naive_fla(args))
                got = iter(got)
                return tuple(next(got) if n else None for n in need)

        out = Swapped.apply(*[call[n] for n in names])
        return out if isinstance(out, tuple) else (out, None)

    return chunk_gated_delta_rule


def _ratio(a, b):
    """RMS(a - b) / RMS(b), FLA's error ratio."""
    if a is None or b is None:
        return None
    d = a.double() - b.double()
    return (d.pow(2).mean().sqrt() / b.double().pow(2).mean().sqrt().clamp_min(1e-30)).item()


def _note_beside_fla(fla_fn, call):
    """Notes gdn's outputs against FLA's forward on the same call (printed
    with a failure): which side a failed check points at."""
    with torch.no_grad():
        o, ht = gdn.chunk_gated_delta_rule(**call)
        try:
            fo, fht = fla_fn(**call)
        except Exception:  # a note only: FLA's refusal is the test's to meet, not this one's
            return
    _beside_fla.setdefault(_current["id"], []).append((_ratio(o, fo), _ratio(ht, fht)))


def pytest_configure(config):
    if os.environ.get("FLA_CI_ENV") == "1":
        # FLA's assert_close only warns under FLA_CI_ENV: nothing would fail.
        raise pytest.UsageError("unset FLA_CI_ENV: under it FLA's assert_close warns instead of failing")


def _logged(check):
    """FLA's assert_close, the same check, with each failure noted."""

    def assert_close(prefix, *args, **kwargs):
        try:
            return check(prefix, *args, **kwargs)
        except AssertionError as e:
            _failed_checks.setdefault(_current["id"], []).append(str(e).strip() or prefix)
            raise

    return assert_close


def pytest_collection_modifyitems(session, config, items):
    swapped = set()
    for item in items:
        mod = item.module
        if mod in swapped:
            continue
        fn = getattr(mod, "chunk_gated_delta_rule", None)
        if fn is None:
            raise pytest.UsageError(f"{mod.__name__} has no chunk_gated_delta_rule to swap for gdn's")
        mod.chunk_gated_delta_rule = _swap(fn)
        if hasattr(mod, "assert_close"):
            mod.assert_close = _logged(mod.assert_close)
        swapped.add(mod)


def pytest_runtest_setup(item):
    _current["id"] = item.nodeid


def pytest_runtest_logreport(report):
    if report.when != "call" or not report.failed:
        return
    tr = _reporter[0]
    if tr is None:
        return
    why = "; ".join(_failed_checks.get(report.nodeid) or report.longreprtext.strip().splitlines()[-1:])
    beside = ", ".join(f"o {o:.2e} ht {'-' if h is None else format(h, '.2e')}"
                       for o, h in _beside_fla.get(report.nodeid, []))
    tr.write_line(f"\nFAILED {report.nodeid}: {why} [gdn against FLA's forward, per call: {beside or 'no call'}]")


_reporter = [None]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _reporter[0] = session.config.pluginmanager.getplugin("terminalreporter")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    stats = terminalreporter.stats
    passed, failed = len(stats.get("passed", [])), len(stats.get("failed", []))
    skipped = stats.get("skipped", [])
    dim = sum(1 for r in skipped if "head dimension" in str(r.longrepr))
    terminalreporter.write_line(
        f"gdn in FLA's tests: {passed + failed + len(skipped)} cases, {passed + failed} run through gdn "
        f"({_counts['swapped_calls']} calls), {passed} passed, {failed} failed, {len(skipped)} skipped "
        f"({dim} for a head dimension other than {HEAD_DIM})")
    if _naive_grads:
        why = "; ".join(sorted(set(_naive_grads.values())))
        terminalreporter.write_line(
            f"gradient from FLA's naive recurrence in {len(_naive_grads)} cases, FLA's backward having refused "
            f"({why}): their gradient checks compare FLA's reference with itself")
