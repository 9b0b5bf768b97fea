"""Every HTML and terminal report, on one set of shared helpers (``scijudge.report.html``)."""
