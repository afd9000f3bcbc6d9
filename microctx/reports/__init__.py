"""Reports: papermill-executed notebooks exported to HTML, their charts, and example submissions."""
