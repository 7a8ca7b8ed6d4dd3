"""The Python entry points: chunk_gated_delta_rule (FLA's forward) and decode.

Each call checks its arguments here first (ArgumentError naming the
argument), allocates its outputs with torch, then makes one libgdn call on
the caller's stream. Nothing synchronises, so a call may be captured into a
torch.cuda.graph (give cu_seqlens_cpu then: reading cu_seqlens back from the
device would synchronise, which capture forbids).
"""
import ctypes
import math

from . import _abi, _lib
from ._tensors import check_dtype, check_shape, common_device, describe, torch_module
from .errors import ArgumentError

D = 128  # the head dimension gdn's kernels are built for
_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_NO_BACKWARD = ("gdn computes the forward only (inference); its backward is not implemented. "
                "Train with FLA's chunk_gated_delta_rule, or call gdn under torch.no_grad().")


def _opt(name, obj):
    return None if obj is None else describe(name, obj)


def _host_ints(name, dev, host, want_len):
    """The host copy of a small int tensor (cu_seqlens, slots): host if given,
    else read back from dev (torch only; it synchronises)."""
    if host is None:
        torch = torch_module()
        if torch is None or not isinstance(dev.obj, torch.Tensor):
            raise ArgumentError(name + "_cpu", f"needed with a {name} that is not a torch tensor")
        host = dev.obj.tolist()
    elif hasattr(host, "tolist"):
        host = host.tolist()
    host = [int(x) for x in host]
    if want_len is not None and len(host) != want_len:
        raise ArgumentError(name + "_cpu", f"{len(host)} values, {name} has {want_len}")
    return host


def _seqs(cu, cu_cpu, B):
    """gdn_seqs of cu_seqlens (absent: B sequences) and the count N."""
    if cu is None:
        if cu_cpu is not None:
            raise ArgumentError("cu_seqlens_cpu", "given without cu_seqlens")
        return _abi.Seqs(), B, None
    check_dtype(cu, _abi.INT32, _abi.INT64)
    if len(cu.shape) != 1 or cu.shape[0] < 2:
        raise ArgumentError("cu_seqlens", f"shape {list(cu.shape)}, want [N+1] with N >= 1")
    if B != 1:
        raise ArgumentError("cu_seqlens", f"packed sequences need batch size 1, q has {B}")
    host = _host_ints("cu_seqlens", cu, cu_cpu, cu.shape[0])
    arr = (ctypes.c_int64 * len(host))(*host)
    return _abi.Seqs(host=arr, n=len(host), device=cu.c()), len(host) - 1, arr


def _scale(scale):
    if scale is None:
        return 0.0  # gdn's default, 1/sqrt(128): FLA's K ** -0.5
    s = float(scale)
    if s == 0 or not math.isfinite(s):
        raise ArgumentError("scale", f"{scale} must be finite and non-zero")
    return s


def _qkv(q, k, v):
    q, k, v = describe("q", q), describe("k", k), describe("v", v)
    check_dtype(q, _abi.BF16, _abi.FP16)
    check_shape(q, (None, None, None, D))
    B, T, Hq, _ = q.shape
    check_dtype(k, q.dtype)
    check_shape(k, (B, T, Hq, D))
    check_dtype(v, q.dtype)
    check_shape(v, (B, T, None, D))
    Hv = v.shape[2]
    if Hq == 0 or Hv % Hq:
        raise ArgumentError("v", f"{Hv} value heads, not a multiple of q's {Hq} heads")
    return q, k, v, B, T, Hv


def _gates(q, g, beta, A_log, dt_bias, B, T, Hv, gate_in_kernel, beta_logits, neg_eigval):
    g, beta = describe("g", g), describe("beta", beta)
    check_dtype(g, _abi.FP32)
    check_shape(g, (B, T, Hv))
    check_dtype(beta, _abi.FP32, q.dtype)
    check_shape(beta, (B, T, Hv))
    a_log, dt_bias = _opt("A_log", A_log), _opt("dt_bias", dt_bias)
    if gate_in_kernel and a_log is None:
        raise ArgumentError("A_log", "required with use_gate_in_kernel=True")
    torch = torch_module()
    if gate_in_kernel and dt_bias is None and (torch is None or not isinstance(a_log.obj, torch.Tensor)):
        # Only torch can make the zero bias that stands for none.
        raise ArgumentError("dt_bias", "required with use_gate_in_kernel=True unless A_log is a torch tensor "
                                       "(no dt_bias means a zero bias: pass a zero [HV] float32 array)")
    for t in (a_log, dt_bias):
        if not gate_in_kernel and t is not None:
            raise ArgumentError(t.name, "given without use_gate_in_kernel=True")
        if t is not None:
            check_dtype(t, _abi.FP32)
            check_shape(t, (Hv,))
    if neg_eigval and not beta_logits:
        raise ArgumentError("allow_neg_eigval", "needs use_beta_sigmoid_in_kernel=True (beta = 2 sigmoid(b))")
    return g, beta, a_log, dt_bias


def _zero_bias(dt_bias, a_log, Hv, stream):
    """dt_bias, or with use_gate_in_kernel and none given, FLA's meaning of
    none: a zero bias, a new [Hv] float32 tensor made on the call's stream
    (so that torch reuses its memory only after the call has read it)."""
    if dt_bias is not None or a_log is None:
        return dt_bias
    torch = torch_module()  # _gates checked that a_log is a torch tensor
    dev = a_log.obj.device
    if stream == torch.cuda.current_stream(dev).cuda_stream:
        return describe("dt_bias", torch.zeros(Hv, dtype=torch.float32, device=dev))
    with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=dev)):
        return describe("dt_bias", torch.zeros(Hv, dtype=torch.float32, device=dev))


def _output(name, given, shape, dt, like):
    """An output: the caller's (checked) or a new torch tensor."""
    if given is not None:
        t = describe(name, given)
        check_dtype(t, dt)
        check_shape(t, shape)
        return t
    torch = torch_module()
    if torch is None or not isinstance(like.obj, torch.Tensor):
        raise ArgumentError(name, "torch is not imported to allocate it: pass your own buffer")
    tdt = {_abi.BF16: torch.bfloat16, _abi.FP16: torch.float16, _abi.FP32: torch.float32}[dt]
    return describe(name, torch.empty(shape, dtype=tdt, device=like.obj.device))


def _device(tensors):
    """The tensors' one CUDA device (asking the driver for those that do not
    say), checked before the call."""
    device = common_device(tensors)
    unknown = [t for t in tensors if t is not None and t.device is None]
    if not unknown:
        return device
    cuda = _lib.init_driver()
    for t in unknown:
        ordinal = ctypes.c_int(-1)
        rc = cuda.cuPointerGetAttribute(ctypes.byref(ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ctypes.c_uint64(t.ptr))
        if rc != 0:
            raise ArgumentError(t.name, f"is not CUDA device memory (cuPointerGetAttribute returned {rc})")
        if device is None:
            device = ordinal.value
        elif ordinal.value != device:
            raise ArgumentError(t.name, f"is on cuda:{ordinal.value}, the other tensors on cuda:{device}")
    return device


def _stream(stream, device):
    if stream is not None:
        return int(stream)
    torch = torch_module()
    return torch.cuda.current_stream(device).cuda_stream if torch is not None else 0


def _without_grad(run, tensors):
    """run() under an autograd node whose backward raises, where a tensor
    requires grad; else run() as it is."""
    torch = torch_module()
    if torch is None or not torch.is_grad_enabled() or not any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
        return run()

    class GdnForward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            return run()

        @staticmethod
        def backward(ctx, *grads):
            raise NotImplementedError(_NO_BACKWARD)

    return GdnForward.apply(*[t for t in tensors if isinstance(t, torch.Tensor)])


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                           allow_neg_eigval=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                           cp_context=None, *, use_gate_in_kernel=False, A_log=None, dt_bias=None, out=None,
                           final_state_out=None, stream=None):
    """Gated DeltaNet's chunked forward, FLA's chunk_gated_delta_rule
    (docs/SPEC.md): returns (o, final_state), final_state None unless
    output_final_state. The arguments are FLA's, in FLA's order, so that a
    call to one runs unchanged on the other; use_gate_in_kernel, A_log and
    dt_bias are keywords, as FLA reads them from its **kwargs.

    q, k [B, T, H, 128] and v [B, T, HV, 128] bfloat16 or float16 (HV a
    multiple of H); g [B, T, HV] float32, the per-token log-gate (with
    use_gate_in_kernel its raw input a, and A_log, dt_bias [HV] float32:
    g = -exp(A_log) softplus(a + dt_bias); no dt_bias means zeros, as in
    FLA); beta [B, T, HV] float32 or q's dtype (with
    use_beta_sigmoid_in_kernel its logits, with allow_neg_eigval also
    doubled); initial_state [N, HV, 128, 128] float32 ([N, HV, V, K]
    with state_v_first); cu_seqlens [N+1] int32 or int64 with B = 1.
    o is v's dtype; final_state float32, laid out as initial_state.

    cu_seqlens_cpu: the same boundaries on the host (else read back from
    the device, which synchronises and cannot be captured). cp_context
    (FLA's context parallelism) must be None. Keyword-only extras: out and
    final_state_out, buffers to write instead of new torch tensors; stream,
    a CUstream (default: torch's current stream). There is no backward:
    the gradient raises NotImplementedError.
    """
    if cp_context is not None:
        raise ArgumentError("cp_context", "context parallelism is not supported: split the sequence yourself "
                                          "and pass each part's final state as the next part's initial_state")
    q_, k_, v_, B, T, Hv = _qkv(q, k, v)
    g_, beta_, a_log, dt_b = _gates(q_, g, beta, A_log, dt_bias, B, T, Hv, use_gate_in_kernel,
                                    use_beta_sigmoid_in_kernel, allow_neg_eigval)
    cu = _opt("cu_seqlens", cu_seqlens)
    seqs, N, keep = _seqs(cu, cu_seqlens_cpu, B)
    h0 = _opt("initial_state", initial_state)
    if h0 is not None:
        check_dtype(h0, _abi.FP32)
        check_shape(h0, (N, Hv, D, D))
    if final_state_out is not None and not output_final_state:
        raise ArgumentError("final_state_out", "given without output_final_state=True")
    a = _abi.FullArgs(scale=_scale(scale), layout=_abi.LAYOUT_VK if state_v_first else _abi.LAYOUT_KV,
                      l2norm=bool(use_qk_l2norm_in_kernel), gate_in_kernel=bool(use_gate_in_kernel),
                      beta_logits=bool(use_beta_sigmoid_in_kernel), neg_eigval=bool(allow_neg_eigval))
    inputs = [q_, k_, v_, g_, beta_, a_log, dt_b, h0, cu]
    device = common_device(inputs)
    o = _output("out", out, (B, T, Hv, D), v_.dtype, v_)
    ht = _output("final_state_out", final_state_out, (N, Hv, D, D), _abi.FP32, v_) if output_final_state else None
    device = _device(inputs + [o, ht])
    s = _stream(stream, device)
    dt_b = _zero_bias(dt_b, a_log, Hv, s)
    for field, t in (("q", q_), ("k", k_), ("v", v_), ("g", g_), ("beta", beta_), ("a_log", a_log),
                     ("dt_bias", dt_b), ("h0", h0), ("o", o), ("ht", ht)):
        if t is not None:
            setattr(a, field, t.c())
    a.cu_seqlens = seqs

    def run():
        lib, h = _lib.runtime(device)
        _lib.raise_for(lib, h, lib.gdn_forward_full(h, ctypes.byref(a), s))
        return o.obj, (ht.obj if ht is not None else None)

    return _without_grad(run, [q, k, v, g, beta, initial_state, A_log, dt_bias])


def _pool(state_pool, slots, slots_cpu, N):
    """gdn_pool of a state pool and its slot table."""
    states, sl = describe("state_pool", state_pool), describe("slots", slots)
    check_dtype(states, _abi.FP32, _abi.BF16)
    check_dtype(sl, _abi.INT32)
    check_shape(sl, (N,))
    host = _host_ints("slots", sl, slots_cpu, N)
    arr = (ctypes.c_int32 * N)(*host)
    return _abi.Pool(states=states.c(), slots=arr, n_slots=N, slots_device=sl.c()), states, sl


def decode(q, k, v, g, beta, state_pool, slots, *, slots_cpu=None, cu_seqlens=None, cu_seqlens_cpu=None,
           scale=None, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None, dt_bias=None,
           use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
           output_token_states=False, out=None, token_states_out=None, stream=None):
    """A decode step (docs/SPEC.md, "Decode"): 1 to 8 tokens for each of N
    sequences, each starting from state_pool[slots[n]] (zero for a negative
    slot) and writing its final state back there, in place. Returns o, or
    (o, token_states) with output_token_states: the state after every token.

    q, k, v, g, beta, A_log, dt_bias and the flags are chunk_gated_delta_rule's,
    with T <= 8 (or B = 1 and cu_seqlens of sequences of 1 to 8 tokens);
    state_pool [S, HV, 128, 128] float32 or bfloat16; slots [N] int32 on the
    device, slots_cpu the same on the host (else read back, synchronising).
    """
    q_, k_, v_, B, T, Hv = _qkv(q, k, v)
    g_, beta_, a_log, dt_b = _gates(q_, g, beta, A_log, dt_bias, B, T, Hv, use_gate_in_kernel,
                                    use_beta_sigmoid_in_kernel, allow_neg_eigval)
    cu = _opt("cu_seqlens", cu_seqlens)
    seqs, N, keep = _seqs(cu, cu_seqlens_cpu, B)
    pool, states, sl = _pool(state_pool, slots, slots_cpu, N)
    if token_states_out is not None and not output_token_states:
        raise ArgumentError("token_states_out", "given without output_token_states=True")
    a = _abi.DecodeArgs(scale=_scale(scale), layout=_abi.LAYOUT_VK if state_v_first else _abi.LAYOUT_KV,
                        l2norm=bool(use_qk_l2norm_in_kernel), gate_in_kernel=bool(use_gate_in_kernel),
                        beta_logits=bool(use_beta_sigmoid_in_kernel), neg_eigval=bool(allow_neg_eigval))
    inputs = [q_, k_, v_, g_, beta_, a_log, dt_b, cu, states, sl]
    common_device(inputs)
    o = _output("out", out, (B, T, Hv, D), v_.dtype, v_)
    ts = (_output("token_states_out", token_states_out, (B * T, Hv, D, D), states.dtype, v_)
          if output_token_states else None)
    device = _device(inputs + [o, ts])
    s = _stream(stream, device)
    dt_b = _zero_bias(dt_b, a_log, Hv, s)
    for field, t in (("q", q_), ("k", k_), ("v", v_), ("g", g_), ("beta", beta_), ("a_log", a_log),
                     ("dt_bias", dt_b), ("o", o), ("token_states", ts)):
        if t is not None:
            setattr(a, field, t.c())
    a.cu_seqlens, a.pool = seqs, pool

    def run():
        lib, h = _lib.runtime(device)
        _lib.raise_for(lib, h, lib.gdn_decode(h, ctypes.byref(a), s))
        return o.obj if ts is None else (o.obj, ts.obj)

    return _without_grad(run, [q, k, v, g, beta, A_log, dt_bias])
