"""Jenkins' ``tree=`` query parameter: field selection with nesting (``a[b,c]``) and ranges (``{0,10}``).

Works on plain JSON documents; must not import the rest of the package (``views.api_answer`` applies it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TreeNode:
    children: dict[str, TreeNode] = field(default_factory=dict)
    start: int | None = None
    end: int | None = None


class TreeSyntaxError(ValueError):
    pass


def parse_tree(spec: str) -> TreeNode:
    node, position = _parse_list(spec, 0)
    if position != len(spec):
        raise TreeSyntaxError(f"unexpected {spec[position]!r} at {position} in tree={spec}")
    return node


def _parse_list(spec: str, position: int) -> tuple[TreeNode, int]:
    node = TreeNode()
    while position < len(spec) and spec[position] not in "]":
        name_start = position
        while position < len(spec) and spec[position] not in ",[]{}":
            position += 1
        name = spec[name_start:position].strip()
        child = TreeNode()
        if position < len(spec) and spec[position] == "[":
            child, position = _parse_list(spec, position + 1)
            if position >= len(spec) or spec[position] != "]":
                raise TreeSyntaxError(f"missing ']' in tree={spec}")
            position += 1
        if position < len(spec) and spec[position] == "{":
            close = spec.find("}", position)
            if close < 0:
                raise TreeSyntaxError(f"missing '}}' in tree={spec}")
            child.start, child.end = _parse_range(spec[position + 1 : close])
            position = close + 1
        if name:
            node.children[name] = child
        if position < len(spec) and spec[position] == ",":
            position += 1
    return node, position


def _parse_range(text: str) -> tuple[int | None, int | None]:
    if "," not in text:
        index = int(text)
        return index, index + 1
    low, high = text.split(",", 1)
    return (int(low) if low.strip() else None), (int(high) if high.strip() else None)


def prune(value: Any, node: TreeNode) -> Any:
    """Keep only the selected fields (plus ``_class``); absent fields stay absent."""
    if isinstance(value, list):
        sliced = value[node.start : node.end] if (node.start is not None or node.end is not None) else value
        return [prune(item, node) for item in sliced]
    if isinstance(value, dict):
        pruned: dict[str, Any] = {}
        if "_class" in value:
            pruned["_class"] = value["_class"]
        for name, child in node.children.items():
            if name in value:
                pruned[name] = prune(value[name], child)
        return pruned
    return value
