"""The VP-Sources doctrine paragraphs (spec §27.14), appended verbatim to the descriptions of recall,
hybrid_search, text_search, list_briefing_notes and search_briefing_notes_by_keyword."""

VP_SOURCES_DOCTRINE = (
    "**VP-Sources doctrine**: MUST be called before any factual claim about fleet state, audits, dette tooling, "
    "mission/task/client status, incident history, doctrine references.\n"
    'Cite returned ids in the answer footer as `VP-Sources: recall("<query>")→[ids] | none-needed:<reason>`.'
)


def with_doctrine(description: str) -> str:
    return description.rstrip() + "\n\n" + VP_SOURCES_DOCTRINE
