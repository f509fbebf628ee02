# IPython kernel settings for the book build (tools/build-book.sh points IPYTHONDIR here).
c = get_config()  # noqa: F821 (IPython defines it when it reads this file)
# Figures as PNG at twice the resolution, shown at their normal size: sharp on HiDPI screens.
c.InlineBackend.figure_formats = {"retina"}
# Nothing to remember between builds.
c.HistoryManager.enabled = False
