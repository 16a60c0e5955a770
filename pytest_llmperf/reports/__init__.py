"""A typed report model -> terminal, Markdown, HTML, JUnit, run file, plots."""
