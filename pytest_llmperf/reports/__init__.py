"""A typed report model -> terminal, Markdown, HTML, JUnit, the JSON run file, plots and
`llmperf history`'s pages; saved runs read back; the commands that read them (commands/).

May import history/ and the layers below it; never session/ or plugin/: writers get records,
not the session.
"""
