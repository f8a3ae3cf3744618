"""A small Pillow top-down renderer for SMAC unit tables (``render()``, ``render_mode="rgb_array"`` and the
replays, GIF or MP4: :func:`save_frames`).

A frame is framed on the fight: the view is the bounding box of the living units with a margin, made square
and kept inside the map (a replay keeps one view for the whole episode, the box of every frame, so the camera
does not jump). Units are circles (allies blue, enemies red) marked with their type's letter
(:data:`LETTERS`), with a health bar and, for Protoss, a shield bar above; a header gives the step, the units
alive on each side and, on an episode's last frame, its outcome.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from marl.envs.smac.types import MapSpec, SideTable, UnitTable

# Drawing radii in world units (visual only).
_RADIUS = {
    "marine": 0.375,
    "marauder": 0.5625,
    "medivac": 0.75,
    "stalker": 0.625,
    "zealot": 0.5,
    "colossus": 1.0,
    "hydralisk": 0.625,
    "zergling": 0.375,
    "baneling": 0.375,
    "spine_crawler": 0.9,
}
# One letter per unit type (zergLing, so that it differs from the Zealot on so_many_baneling).
LETTERS = {
    "marine": "M",
    "marauder": "R",
    "medivac": "V",
    "stalker": "S",
    "zealot": "Z",
    "colossus": "C",
    "hydralisk": "H",
    "zergling": "L",
    "baneling": "B",
    "spine_crawler": "P",
}
_WALK, _BLOCK = (214, 208, 190), (70, 66, 60)
_ALLY, _ENEMY = (40, 110, 220), (215, 50, 40)
_HEALTH, _SHIELD, _EMPTY = (60, 220, 60), (90, 200, 250), (40, 40, 40)
MARGIN = 3.0  # world units around the units' bounding box
MIN_VIEW = 12.0  # the smallest view side, in world units
HEADER_PX = 18


def view_box(spec: MapSpec, tables: Sequence[UnitTable]) -> tuple[float, float, float]:
    """``(x0, y0, side)``: the square, in world units, that holds every living unit of ``tables`` with
    :data:`MARGIN` around them (at least :data:`MIN_VIEW` wide), inside the map where the map allows."""
    mx, my = spec.map_size
    pos = [s.pos[s.alive] for t in tables for s in (t.allies, t.enemies)]
    pts = np.concatenate([p.reshape(-1, 2) for p in pos]) if pos else np.zeros((0, 2))
    if len(pts) == 0:
        return 0.0, 0.0, float(max(mx, my))
    lo, hi = pts.min(0) - MARGIN, pts.max(0) + MARGIN
    side = float(min(max(MIN_VIEW, *(hi - lo)), max(mx, my)))
    centre = (lo + hi) / 2
    x0 = float(np.clip(centre[0] - side / 2, 0.0, max(0.0, mx - side)))
    y0 = float(np.clip(centre[1] - side / 2, 0.0, max(0.0, my - side)))
    return x0, y0, side


def outcome(table: UnitTable) -> str:
    """``won`` / ``lost`` / ``draw`` from who is left, or ``time limit`` when both sides still stand."""
    left = (bool(table.allies.alive.any()), bool(table.enemies.alive.any()))
    return {(True, False): "won", (False, True): "lost", (False, False): "draw"}.get(left, "time limit")


def render_frame(
    spec: MapSpec,
    table: UnitTable,
    actions: Sequence[int] | None = None,
    size: int = 512,
    medivac_heals: bool = False,
    step: int | None = None,
    result: str | None = None,
    view: tuple[float, float, float] | None = None,
) -> np.ndarray:
    """RGB uint8 image ``(size, size, 3)`` of ``table``; north is up.

    ``view`` (``(x0, y0, side)`` in world units; default :func:`view_box` of this table) is the square shown;
    ``actions`` (SMAC ints of the step that led here) draw a line from each attacker to its target; ``step``
    and ``result`` (e.g. :func:`outcome`) go in the header.
    """
    x0, y0, side = view if view is not None else view_box(spec, [table])
    scale = size / side  # pixels per world unit; the header covers part of the top margin
    img = _terrain(spec, x0, y0, side, size, scale)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default()

    def px(p: np.ndarray) -> tuple[float, float]:
        return float((p[0] - x0) * scale), float(size - (p[1] - y0) * scale)

    if actions is not None:
        for i, a in enumerate(actions):
            if a >= 6 and table.allies.alive[i]:
                j = int(a) - 6
                heal = medivac_heals and table.allies.unit_type[i] == "medivac"
                side_t = table.allies if heal else table.enemies
                if j < len(side_t.health) and side_t.alive[j]:
                    draw.line(
                        [px(table.allies.pos[i]), px(side_t.pos[j])],
                        fill=(60, 200, 90) if heal else (250, 220, 40),
                        width=max(1, int(scale) // 8),
                    )
    for side_t, colour in ((table.allies, _ALLY), (table.enemies, _ENEMY)):
        _draw_side(draw, side_t, colour, scale, px, font)
    draw.rectangle([0, 0, size, HEADER_PX - 1], fill=(20, 20, 20))
    head = [] if step is None else [f"step {step}"]
    head.append(f"allies {int(table.allies.alive.sum())}/{len(table.allies.alive)}")
    head.append(f"enemies {int(table.enemies.alive.sum())}/{len(table.enemies.alive)}")
    head += [result.upper()] if result else []
    draw.text((4, 3), "   ".join(head), fill=(240, 240, 240), font=font)
    return np.asarray(img, dtype=np.uint8)


def _terrain(spec: MapSpec, x0: float, y0: float, side: float, out_px: int, scale: float) -> Image.Image:
    """The walkable/blocked cells under the view, one colour per cell, scaled to ``out_px`` square."""
    grid = spec.pathing_grid  # (map_x, map_y)
    xs = np.clip(np.floor(x0 + (np.arange(out_px) + 0.5) / scale).astype(int), 0, grid.shape[0] - 1)
    ys = np.clip(np.floor(y0 + side - (np.arange(out_px) + 0.5) / scale).astype(int), 0, grid.shape[1] - 1)
    walk = grid[xs[None, :], ys[:, None]]  # rows top to bottom (north first), columns west to east
    rgb = np.where(walk[..., None], np.array(_WALK), np.array(_BLOCK)).astype(np.uint8)
    return Image.fromarray(rgb, "RGB")


def _draw_side(
    draw: ImageDraw.ImageDraw, side: SideTable, colour: tuple[int, int, int], scale: float, px, font
) -> None:
    for k, unit in enumerate(side.unit_type):
        if not side.alive[k]:
            continue
        x, y = px(side.pos[k])
        r = max(4.0, _RADIUS.get(unit, 0.5) * scale)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=colour, outline=(0, 0, 0))
        draw.text((x, y), LETTERS.get(unit, "?"), fill=(255, 255, 255), font=font, anchor="mm")
        bars = [(side.health[k], side.health_max[k], _HEALTH)]
        if side.shield_max[k] > 0:
            bars.append((side.shield[k], side.shield_max[k], _SHIELD))
        for row, (value, full, fill) in enumerate(bars):
            top = y - r - 4 - 4 * row
            frac = min(max(float(value / full), 0.0), 1.0) if full > 0 else 0.0
            draw.rectangle([x - r, top, x + r, top + 2], fill=_EMPTY)
            draw.rectangle([x - r, top, x - r + 2 * r * frac, top + 2], fill=fill)


def episode_frames(
    spec: MapSpec,
    tables: Sequence[UnitTable],
    actions: Sequence[Sequence[int] | None],
    ended: bool,
    episode_limit: int,
    medivac_heals: bool = True,
) -> list[np.ndarray]:
    """An episode's frames under one view (:func:`view_box` of every table), each with its step; the last
    one with the outcome when the episode ``ended`` (``time limit`` only when it ran to ``episode_limit``)."""
    view = view_box(spec, tables)
    result = outcome(tables[-1]) if ended and tables else None
    if result == "time limit" and len(tables) - 1 < episode_limit:
        result = None  # an episode cut short by reset(), not by the limit
    last = len(tables) - 1
    return [
        render_frame(
            spec, t, a, medivac_heals=medivac_heals, step=i, result=result if i == last else None, view=view
        )
        for i, (t, a) in enumerate(zip(tables, actions, strict=True))
    ]


def save_gif(frames: Sequence[np.ndarray], path: str | Path, fps: float = 8.0) -> Path:
    """Write RGB frames as an animated GIF; returns the path."""
    if not frames:
        raise ValueError("no frames to save: run at least reset() before save_replay()")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path


REPLAY_FORMATS = ("gif", "mp4")
MP4_NEEDS = "MP4 replays need imageio-ffmpeg, the 'replay' extra: pip install 'marl[replay]'"


def replay_format_error(replay_format: str) -> str | None:
    """Why ``replay_format`` cannot be written here (one line), or None when it can: one of
    :data:`REPLAY_FORMATS`, and for ``mp4`` the ``imageio-ffmpeg`` package installed."""
    if replay_format not in REPLAY_FORMATS:
        return f"replay format {replay_format!r} is not one of {', '.join(REPLAY_FORMATS)}"
    if replay_format == "mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        return f"{MP4_NEEDS} (or save a GIF)"
    return None


def save_mp4(frames: Sequence[np.ndarray], path: str | Path, fps: float = 8.0) -> Path:
    """Write RGB frames as an H.264 MP4 (yuv420p: plays in browsers and common players) with the ffmpeg
    that ``imageio-ffmpeg`` ships; returns the path. Without that package: ``ValueError`` saying so."""
    if not frames:
        raise ValueError("no frames to save: run at least reset() before save_replay()")
    if (reason := replay_format_error("mp4")) is not None:
        raise ValueError(reason)
    import imageio_ffmpeg

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames[0].shape[:2]
    writer = imageio_ffmpeg.write_frames(
        str(path), (width, height), fps=fps, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=16
    )
    writer.send(None)  # starts ffmpeg
    try:
        for frame in frames:
            writer.send(np.ascontiguousarray(frame, dtype=np.uint8))
    finally:
        writer.close()
    return path


def save_frames(frames: Sequence[np.ndarray], path: str | Path, fps: float = 8.0) -> Path:
    """Write a replay's frames in the format the path's suffix names (``.gif`` or ``.mp4``)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix == "mp4":
        return save_mp4(frames, path, fps)
    if suffix == "gif":
        return save_gif(frames, path, fps)
    raise ValueError(f"a replay file ends in .gif or .mp4, not {Path(path).name!r}")
