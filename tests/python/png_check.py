"""The check every rendered figure gets: the PNG decodes, has the expected pixel size, and is
neither one flat colour nor almost blank. Shared by tests/python/test_plots.py and the
end-to-end test on the real fixture (tests/e2e/test_real_minilm.py)."""

import os

import numpy as np


def check_png(path, shape=None, min_non_white=0.02):
    """Return the decoded image; raise AssertionError naming ``path`` when a check fails.
    ``shape``: (height, width) in pixels, or None for any size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    if not os.path.isfile(path):
        raise AssertionError(f"{path} was not written")
    img = mpimg.imread(path)  # raises if the file does not decode
    if shape is not None and img.shape[:2] != tuple(shape):
        raise AssertionError(f"{path}: pixel size {img.shape[:2]}, expected {tuple(shape)}")
    pixels = img.reshape(-1, img.shape[-1])[:, :3]
    colours = np.unique(np.round(pixels * 255).astype(np.uint8), axis=0)
    if len(colours) <= 1:
        raise AssertionError(f"{path} is one flat colour")
    non_white = np.mean(np.any(pixels < 0.95, axis=1))
    if non_white <= min_non_white:
        raise AssertionError(f"{path} is almost blank ({non_white:.3f} of the pixels "
                             f"are not white)")
    return img
