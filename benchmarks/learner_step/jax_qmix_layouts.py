"""The QMIX learner step in JAX, in every layout a JAX practitioner would try (``jax_qmix_step.py`` runs it).

One maths, many layouts: RNN agent Dense -> ReLU -> GRU (torch's gate equations) -> Dense over time in
``lax.scan``, target agent and target mixer, double Q, TD(lambda) targets by a reverse ``lax.scan``, QMIX
mixer (|hypernet| weights, ELU), 0.5 * masked MSE, gradient clipping to global norm 10 (torch's
``max_norm / (norm + 1e-6)``) and Adam with torch's update rule (betas 0.9 / 0.999, eps 1e-8 outside the
square root), all in one jitted function. float32 throughout. A layout is six choices, written as a name of
dash-joined tokens in any order (a missing one takes the default, :data:`DEFAULT`):

* projection: ``hoist`` (fc1 and the GRU input projection of all steps computed before the scan), ``cell``
  (fc1 before the scan, the input projection inside the scan cell: JaxMARL's ``ScannedRNN`` around flax's
  ``GRUCell``), ``full`` (fc1, the GRU and fc2 all inside the cell, pymarl's per-step agent);
* gates: ``fused`` (one ``3H``-wide matmul per side), ``split`` (one matmul per gate and side, as flax's
  ``GRUCell``), ``concat`` (``[x, h] @ W`` with one ``2H x 4H`` block matrix; needs ``cell`` or ``full``);
* ``u<k>``: ``lax.scan(..., unroll=k)``;
* ``time`` (inputs transposed to time-major before the scan) or ``batch`` (kept batch-major, each step
  sliced out inside the cell);
* ``donate`` (``donate_argnums`` on the parameters and optimizer state) or ``keep``;
* mixer ``bmm`` (batched matmuls, as pymarl's ``th.bmm``) or ``sum`` (multiply and sum).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

CHOICES = {
    "proj": ("hoist", "cell", "full"),
    "gates": ("fused", "split", "concat"),
    "major": ("time", "batch"),
    "donate": ("donate", "keep"),
    "mixer": ("bmm", "sum"),
}


@dataclass(frozen=True)
class Layout:
    """One way to write the step; :func:`parse_layout` reads its :attr:`name` back."""

    proj: str = "cell"
    gates: str = "fused"
    unroll: int = 1
    major: str = "time"
    donate: str = "donate"
    mixer: str = "bmm"

    @property
    def name(self) -> str:
        return f"{self.proj}-{self.gates}-u{self.unroll}-{self.major}-{self.donate}-{self.mixer}"


DEFAULT = Layout()
PREVIOUS = Layout(proj="hoist")  # the contender before issue 49 (hoisted input projection)


def parse_layout(name: str) -> Layout:
    """A :class:`Layout` from dash-joined tokens (``"cell-split-u4"``); errors say what is allowed."""
    found: dict = {}
    for tok in filter(None, name.strip().split("-")):
        key = next((k for k, vals in CHOICES.items() if tok in vals), None)
        if key is None and tok[:1] == "u" and tok[1:].isdigit() and int(tok[1:]) >= 1:
            key, tok = "unroll", int(tok[1:])
        if key is None or key in found:
            allowed = ", ".join("|".join(v) for v in CHOICES.values())
            raise ValueError(f"bad JAX layout {name!r} at {tok!r}; tokens, one per kind: {allowed}, u<k>")
        found[key] = tok
    layout = replace(DEFAULT, **found)
    if layout.gates == "concat" and layout.proj == "hoist":
        raise ValueError(f"JAX layout {name!r}: concat gates need the projection in the cell (cell or full)")
    return layout


def screening_layouts() -> list[Layout]:
    """The default, then each other choice of one kind at a time (``unroll`` 2, 4, 8)."""
    out = [DEFAULT]
    for f in fields(Layout):
        values = (2, 4, 8) if f.name == "unroll" else CHOICES[f.name]
        out += [replace(DEFAULT, **{f.name: v}) for v in values if v != getattr(DEFAULT, f.name)]
    return out


def combine(best: dict[str, float]) -> Layout:
    """The layout taking, in each kind, the choice whose one-change layout was fastest (``best``: name ->
    seconds per step over :func:`screening_layouts`)."""
    parsed = {parse_layout(n): t for n, t in best.items()}
    pick = {}
    for f in fields(Layout):
        base = getattr(DEFAULT, f.name)
        cands = {
            getattr(lay, f.name): t
            for lay, t in parsed.items()
            if lay == replace(DEFAULT, **{f.name: getattr(lay, f.name)})
        }
        pick[f.name] = min(cands, key=cands.get) if cands else base
    if pick["gates"] == "concat" and pick["proj"] == "hoist":
        pick["gates"] = "fused"
    return Layout(**pick)


def build_loss(meta: dict, layout: Layout):  # noqa: ANN201 (a jittable function)
    """``loss(params, target, batch)`` for the sizes and hyperparameters in ``meta``, in ``layout``."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    n, hd, e = meta["n_agents"], meta["hidden_dim"], meta["embed_dim"]
    gamma, lam = meta["gamma"], meta["td_lambda"]

    def dense(p, name, x):  # noqa: ANN001, ANN202 (torch Linear: x W^T + b)
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def mlp2(p, name, x):  # noqa: ANN001, ANN202 (torch Sequential(Linear, ReLU, Linear))
        return dense(p, name + ".2", jax.nn.relu(dense(p, name + ".0", x)))

    def gate_fns(p, pre):  # noqa: ANN001, ANN202
        """(input projection x -> gi, cell gates (gi or x, h) -> new h) for ``layout.gates``."""
        w_ih, b_ih = p[pre + "rnn.weight_ih"], p[pre + "rnn.bias_ih"]
        w_hh, b_hh = p[pre + "rnn.weight_hh"], p[pre + "rnn.bias_hh"]
        wi = [w_ih[k * hd : (k + 1) * hd].T for k in range(3)]
        wh = [w_hh[k * hd : (k + 1) * hd].T for k in range(3)]
        bi = [b_ih[k * hd : (k + 1) * hd] for k in range(3)]
        bh = [b_hh[k * hd : (k + 1) * hd] for k in range(3)]

        def gru(gi, gh, h):  # noqa: ANN001, ANN202 (torch.nn.GRUCell's equations)
            r = jax.nn.sigmoid(gi[0] + gh[0])
            z = jax.nn.sigmoid(gi[1] + gh[1])
            cand = jnp.tanh(gi[2] + r * gh[2])
            return (1.0 - z) * cand + z * h

        if layout.gates == "fused":
            w_i, w_h = w_ih.T, w_hh.T

            def proj(x):  # noqa: ANN001, ANN202
                return x @ w_i + b_ih

            def cell(gi, h):  # noqa: ANN001, ANN202
                gh = h @ w_h + b_hh
                return gru(
                    [gi[:, k * hd : (k + 1) * hd] for k in range(3)],
                    [gh[:, k * hd : (k + 1) * hd] for k in range(3)],
                    h,
                )

            return proj, cell
        if layout.gates == "split":

            def proj(x):  # noqa: ANN001, ANN202
                return jnp.stack([x @ wi[k] + bi[k] for k in range(3)])

            def cell(gi, h):  # noqa: ANN001, ANN202
                return gru([gi[k] for k in range(3)], [h @ wh[k] + bh[k] for k in range(3)], h)

            return proj, cell
        zero = jnp.zeros((hd, hd), w_ih.dtype)  # concat: [x, h] @ [[Wir Wiz Win 0], [Whr Whz 0 Whn]]
        w_cat = jnp.concatenate(
            [
                jnp.concatenate([wi[0], wi[1], wi[2], zero], 1),
                jnp.concatenate([wh[0], wh[1], zero, wh[2]], 1),
            ],
            0,
        )
        b_cat = jnp.concatenate([bi[0] + bh[0], bi[1] + bh[1], bi[2], bh[2]])

        def cell_cat(x, h):  # noqa: ANN001, ANN202
            g = jnp.concatenate([x, h], 1) @ w_cat + b_cat
            r = jax.nn.sigmoid(g[:, :hd])
            z = jax.nn.sigmoid(g[:, hd : 2 * hd])
            cand = jnp.tanh(g[:, 2 * hd : 3 * hd] + r * g[:, 3 * hd :])
            return (1.0 - z) * cand + z * h

        return None, cell_cat

    def unroll(p, pre, x_BTNI):  # noqa: ANN001, ANN202
        """Q-values ``(B, T, N, A)``; the hidden state starts at zero, ``M = B*N`` rows per step."""
        b, t, _, _ = x_BTNI.shape
        proj, gates = gate_fns(p, pre)
        if proj is None:  # concat: the projection is part of the cell's one matmul

            def proj(x):  # noqa: ANN001, ANN202
                return x

        def pre_cell(x):  # noqa: ANN001, ANN202 (what is computed for all steps before the scan)
            if layout.proj == "full":
                return x
            emb = jax.nn.relu(dense(p, pre + "fc1", x))
            return proj(emb) if layout.proj == "hoist" else emb

        def in_cell(x_M, h_MH):  # noqa: ANN001, ANN202
            if layout.proj == "full":
                x_M = jax.nn.relu(dense(p, pre + "fc1", x_M))
            h_MH = gates(x_M if layout.proj == "hoist" else proj(x_M), h_MH)
            return h_MH, (dense(p, pre + "fc2", h_MH) if layout.proj == "full" else h_MH)

        h0 = jnp.zeros((b * n, hd), x_BTNI.dtype)
        if layout.major == "time":
            xs = pre_cell(jnp.swapaxes(x_BTNI, 0, 1).reshape(t, b * n, -1))
            if layout.proj == "hoist" and layout.gates == "split":
                xs = jnp.swapaxes(xs, 0, 1)  # (3, T, M, H) -> (T, 3, M, H)
            _, ys = lax.scan(lambda h, x: in_cell(x, h), h0, xs, unroll=layout.unroll)
        else:
            xs = pre_cell(x_BTNI.reshape(b, t, n, -1))  # (B, T, N, .) or (3, B, T, N, H)
            ax = 2 if (layout.proj == "hoist" and layout.gates == "split") else 1

            def step(h, i):  # noqa: ANN001, ANN202
                x = lax.dynamic_index_in_dim(xs, i, axis=ax, keepdims=False)
                return in_cell(x.reshape(*x.shape[: ax - 1], b * n, -1), h)

            _, ys = lax.scan(step, h0, jnp.arange(t), unroll=layout.unroll)
        q_TMA = ys if layout.proj == "full" else dense(p, pre + "fc2", ys)
        return jnp.swapaxes(q_TMA.reshape(t, b, n, -1), 0, 1)

    def mixer(p, pre, q_BTN, st_BTS):  # noqa: ANN001, ANN202 (pymarl's QMixer)
        b, t, _ = q_BTN.shape
        st = st_BTS.reshape(b * t, -1)
        w1 = jnp.abs(mlp2(p, pre + "hyper_w_1", st)).reshape(-1, n, e)
        b1 = dense(p, pre + "hyper_b_1", st)
        w_final = jnp.abs(mlp2(p, pre + "hyper_w_final", st))
        v = mlp2(p, pre + "V", st)
        q = q_BTN.reshape(-1, n)
        if layout.mixer == "bmm":
            hidden = jax.nn.elu((q[:, None, :] @ w1)[:, 0] + b1)
            out = (hidden[:, None, :] @ w_final[:, :, None])[:, 0] + v
        else:
            hidden = jax.nn.elu((q[:, :, None] * w1).sum(1) + b1)
            out = (hidden * w_final).sum(1, keepdims=True) + v
        return out.reshape(b, t, 1)

    def td_lambda(reward, term, mask, tmax):  # noqa: ANN001, ANN202 (pymarl2's backward recursion)
        def back(g_next, xs):  # noqa: ANN001, ANN202
            r, tm, m, q_next = xs
            g = lam * gamma * g_next + m * (r + (1.0 - lam) * gamma * q_next * (1.0 - tm))
            return g, g

        g_last = tmax[:, -1] * (1.0 - term.sum(axis=1))
        xs = tuple(jnp.swapaxes(x, 0, 1) for x in (reward, term, mask, tmax[:, 1:]))
        _, g_TB1 = lax.scan(back, g_last, xs, reverse=True)
        return jnp.swapaxes(g_TB1, 0, 1)

    def loss_fn(params, target, batch):  # noqa: ANN001, ANN202
        inputs, avail, actions, reward, term, mask, state = batch
        q = unroll(params, "agent.", inputs)
        chosen = jnp.take_along_axis(q[:, :-1], actions, axis=3)[..., 0]
        tq = unroll(target, "target_agent.", inputs)
        best = jnp.argmax(jnp.where(avail == 0, -9999999.0, lax.stop_gradient(q)), axis=3)[..., None]
        tmax = mixer(target, "target_mixer.", jnp.take_along_axis(tq, best, axis=3)[..., 0], state)
        targets = lax.stop_gradient(td_lambda(reward, term, mask, tmax))
        td = (mixer(params, "mixer.", chosen, state[:, :-1]) - targets) * mask
        return 0.5 * (td * td).sum() / mask.sum()

    return loss_fn


def build_step(meta: dict, layout: Layout = DEFAULT):  # noqa: ANN201 (a jittable function)
    """``step(params, target, opt, batch) -> (params, opt, loss)``; ``params``/``target`` are dicts of
    torch-named arrays, ``opt`` is ``{"m", "v", "count"}``."""
    import jax
    import jax.numpy as jnp

    clip, lr = meta["grad_norm_clip"], meta["lr"]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    loss_fn = build_loss(meta, layout)
    tmap = jax.tree_util.tree_map

    def step(params, target, opt, batch):  # noqa: ANN001, ANN202
        loss, grads = jax.value_and_grad(loss_fn)(params, target, batch)
        norm = jnp.sqrt(sum((g * g).sum() for g in jax.tree_util.tree_leaves(grads)))
        coef = jnp.minimum(clip / (norm + 1e-6), 1.0)
        grads = tmap(lambda g: g * coef, grads)
        count = opt["count"] + 1.0
        m = tmap(lambda m, g: beta1 * m + (1.0 - beta1) * g, opt["m"], grads)
        v = tmap(lambda v, g: beta2 * v + (1.0 - beta2) * g * g, opt["v"], grads)
        step_size = lr / (1.0 - beta1**count)
        root_bc2 = jnp.sqrt(1.0 - beta2**count)
        params = tmap(lambda p, m, v: p - step_size * m / (jnp.sqrt(v) / root_bc2 + eps), params, m, v)
        return params, {"m": m, "v": v, "count": count}, loss

    return step


def jit_step(meta: dict, layout: Layout):  # noqa: ANN201
    """:func:`build_step` under ``jax.jit``; donates the parameters and optimizer state per the layout."""
    import jax

    return jax.jit(build_step(meta, layout), donate_argnums=(0, 2) if layout.donate == "donate" else ())
