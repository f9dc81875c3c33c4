"""How :mod:`mdf_loops.render` draws a model: the text of labels (``labels``), where edges
attach and how a body is wired to its loop (``layout``), a graph's nodes and edges
(``graphs``), and the clusters of loop nodes and their bodies (``loops``)."""
