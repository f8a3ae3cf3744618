"""A small Pillow top-down renderer for SMAC unit tables (``render()`` and GIF replays)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

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
_WALK, _BLOCK = (214, 208, 190), (70, 66, 60)
_ALLY, _ENEMY = (40, 110, 220), (215, 50, 40)


def render_frame(
    spec: MapSpec,
    table: UnitTable,
    actions: Sequence[int] | None = None,
    cell_px: int = 16,
    medivac_heals: bool = False,
) -> np.ndarray:
    """RGB uint8 image (map_y·cell_px, map_x·cell_px, 3) of ``table``; north is up.

    Cells are drawn walkable/blocked, units as circles (allies blue, enemies red) with a health bar;
    ``actions`` (SMAC ints of the step that led here) draw a line from each attacker to its target.
    """
    mx, my = spec.map_size
    h = my * cell_px
    colours = np.where(spec.pathing_grid.T[::-1, :, None], np.array(_WALK), np.array(_BLOCK)).astype(np.uint8)
    img = Image.fromarray(np.repeat(np.repeat(colours, cell_px, 0), cell_px, 1), "RGB")
    draw = ImageDraw.Draw(img)

    def px(p: np.ndarray) -> tuple[float, float]:
        return float(p[0] * cell_px), float(h - p[1] * cell_px)

    if actions is not None:
        for i, a in enumerate(actions):
            if a >= 6 and table.allies.alive[i]:
                j = int(a) - 6
                heal = medivac_heals and table.allies.unit_type[i] == "medivac"
                side = table.allies if heal else table.enemies
                if j < len(side.health) and side.alive[j]:
                    draw.line(
                        [px(table.allies.pos[i]), px(side.pos[j])],
                        fill=(60, 200, 90) if heal else (250, 220, 40),
                        width=max(1, cell_px // 8),
                    )
    for side, colour in ((table.allies, _ALLY), (table.enemies, _ENEMY)):
        _draw_side(draw, side, colour, cell_px, px)
    return np.asarray(img, dtype=np.uint8)


def _draw_side(
    draw: ImageDraw.ImageDraw, side: SideTable, colour: tuple[int, int, int], cell_px: int, px
) -> None:
    for k, unit in enumerate(side.unit_type):
        if not side.alive[k]:
            continue
        x, y = px(side.pos[k])
        r = max(2.0, _RADIUS.get(unit, 0.5) * cell_px)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=colour, outline=(0, 0, 0))
        total = side.health_max[k] + side.shield_max[k]
        frac = float((side.health[k] + side.shield[k]) / total) if total > 0 else 0.0
        top = y - r - 4
        draw.rectangle([x - r, top, x + r, top + 2], fill=(40, 40, 40))
        draw.rectangle([x - r, top, x - r + 2 * r * min(max(frac, 0.0), 1.0), top + 2], fill=(60, 220, 60))


def save_gif(frames: Sequence[np.ndarray], path: str | Path, fps: float = 8.0) -> Path:
    """Write RGB frames as an animated GIF; returns the path."""
    if not frames:
        raise ValueError("no frames to save: run at least reset() before save_replay()")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path
