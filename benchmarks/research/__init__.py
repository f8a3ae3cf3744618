"""One-off studies: each answered one question that docs/ quotes; not a suite to rerun on every change."""
