"""English and French labels of the `ui://` primitives (`?lang=fr`); every visible or accessible string."""

from __future__ import annotations

LANGS = ("en", "fr")

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "tasks": "Tasks", "title": "Title", "status": "Status", "priority": "Priority",
        "assignedTo": "Assigned to", "task_one": "{n} task", "task_many": "{n} tasks",
        "no_tasks": "No tasks.",
        "messages": "Messages", "message_one": "{n} message", "message_many": "{n} messages",
        "no_messages": "No messages.", "from": "From", "channel": "Channel", "sentAt": "Sent",
        "diary": "Diary", "entry_one": "{n} entry", "entry_many": "{n} entries", "no_entries": "No diary entries.",
        "orchestrator": "Orchestrator", "highlights": "Highlights", "blockers": "Blockers", "date": "Date",
        "missions": "Missions", "mission_one": "{n} mission", "mission_many": "{n} missions",
        "no_missions": "No missions.", "project": "Project", "pilot": "Pilot", "progress": "Progress",
        "briefings": "Briefing notes", "note_one": "{n} note", "note_many": "{n} notes",
        "no_notes": "No briefing notes.", "topic": "Topic", "participants": "Participants",
        "createdBy": "Created by",
        "memories": "Memories", "quote_one": "{n} memory", "quote_many": "{n} memories",
        "no_quotes": "No memories.", "namespace": "Namespace", "type": "Type", "score": "Relevance",
        "error": "Could not load this view",
    },
    "fr": {
        "tasks": "Tâches", "title": "Titre", "status": "Statut", "priority": "Priorité",
        "assignedTo": "Attribué à", "task_one": "{n} tâche", "task_many": "{n} tâches",
        "no_tasks": "Aucune tâche.",
        "messages": "Messages", "message_one": "{n} message", "message_many": "{n} messages",
        "no_messages": "Aucun message.", "from": "De", "channel": "Canal", "sentAt": "Envoyé",
        "diary": "Journal", "entry_one": "{n} entrée", "entry_many": "{n} entrées",
        "no_entries": "Aucune entrée de journal.",
        "orchestrator": "Orchestrateur", "highlights": "Points forts", "blockers": "Blocages", "date": "Date",
        "missions": "Missions", "mission_one": "{n} mission", "mission_many": "{n} missions",
        "no_missions": "Aucune mission.", "project": "Projet", "pilot": "Pilote", "progress": "Progression",
        "briefings": "Notes de briefing", "note_one": "{n} note", "note_many": "{n} notes",
        "no_notes": "Aucune note de briefing.", "topic": "Sujet", "participants": "Participants",
        "createdBy": "Créé par",
        "memories": "Mémoires", "quote_one": "{n} mémoire", "quote_many": "{n} mémoires",
        "no_quotes": "Aucune mémoire.", "namespace": "Espace de noms", "type": "Type", "score": "Pertinence",
        "error": "Impossible de charger cette vue",
    },
}


# Task and mission statuses as shown on badges; the CSS class keeps the raw value.
STATUS_LABELS: dict[str, dict[str, str]] = {
    "en": {"todo": "to do", "in_progress": "in progress", "review": "review", "blocked": "blocked",
           "done": "done", "cancelled": "cancelled", "brainstorm": "brainstorm", "plan": "plan",
           "execute": "execute", "validate": "validate", "complete": "complete"},
    "fr": {"todo": "à faire", "in_progress": "en cours", "review": "en revue", "blocked": "bloquée",
           "done": "terminée", "cancelled": "annulée", "brainstorm": "idéation", "plan": "planification",
           "execute": "exécution", "validate": "validation", "complete": "achevée"},
}


def status_label(lang: str, status: object) -> str:
    """The shown word for a status; an unknown value is shown as stored."""
    text = "" if status is None else str(status)
    return STATUS_LABELS.get(lang, STATUS_LABELS["en"]).get(text, text)


def label(lang: str, key: str) -> str:
    return LABELS.get(lang, LABELS["en"])[key]


def count(lang: str, noun: str, n: int) -> str:
    """'3 tasks' / '3 tâches'; French uses the singular for 0 and 1, English only for 1."""
    singular = n == 1 or (lang == "fr" and n == 0)
    return label(lang, f"{noun}_{'one' if singular else 'many'}").format(n=n)
