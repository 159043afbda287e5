"""English and French strings of the dashboard (the `ui://` labels of ui/i18n.py, plus its own)."""

from __future__ import annotations

from ..ui.i18n import LABELS as UI_LABELS

LANGS = ("en", "fr")

_OWN: dict[str, dict[str, str]] = {
    "en": {
        "app": "vantage-peers dashboard", "skip": "Skip to content", "nav": "Views", "team": "Team",
        "schedule": "Schedule", "memory": "Memory", "claims": "Claims", "activity": "Activity",
        "filter": "Filter", "apply": "Apply", "reset": "Reset", "next_page": "Next page", "first_page": "First page",
        "live_on": "Live", "live_off": "Reconnecting…", "signed_as": "Signed in as", "read_only": "read-only", "logout": "Sign out",
        "language": "Language", "presence": "Presence", "online": "online", "idle": "idle", "stale": "stale", "gone": "gone",
        "any": "any", "instance": "Instance", "summary": "Summary", "last_seen": "Last seen",
        "open_tasks": "Open tasks", "unread": "Unread", "recipients": "Recipients", "read": "Read",
        "to": "To", "content": "Message", "unread_only": "Unread only", "unacked_only": "Awaiting acknowledgement", "dead_only": "Dead-lettered",
        "unacknowledged": "Unacknowledged", "deadLettered": "Dead letters", "acknowledged": "Acknowledged",
        "attempt": "Attempt", "channels": "Channels",
        "compose": "Send a message as", "send": "Send", "receipts": "Receipts", "read_at": "Read at",
        "board": "Board", "assignee": "Assignee", "mission": "Mission", "overdue": "Overdue only",
        "blocked_only": "Blocked only", "more": "More", "due": "Due", "updated": "Updated",
        "history": "History", "segments": "Work segments", "started": "Started", "ended": "Ended",
        "minutes": "Minutes", "dependencies": "Dependencies", "description": "Description",
        "step_in": "Step in", "reassign": "Reassign", "unblock": "Unblock", "cancel": "Cancel task",
        "reason": "Reason", "release": "Release claim", "what": "Event", "who": "Who", "when": "When",
        "detail": "Detail", "recurring": "Recurring tasks", "cron": "Schedule (cron)", "next_runs": "Next runs",
        "paused": "Paused", "pause": "Pause", "resume": "Resume", "jobs": "Scheduler jobs", "job": "Job",
        "last_result": "Last result", "last_run": "Last run", "runs": "Runs", "running": "running now",
        "search": "Search", "query": "Search memories", "matched_by": "Matched by", "why": "Why it matched",
        "mode": "Mode", "kind": "Kind", "holder": "Holder", "key": "Key", "since": "Since",
        "expires": "Expires", "task_claims": "Task claims", "leases": "Leases held", "fencing": "Fencing token", "no_items": "Nothing here.",
        "login": "Sign in", "your_name": "Your name (agents see human:<name>)", "master_secret": "Master secret",
        "or_client": "or an OAuth client whose profile grants the dashboard", "client_id": "Client id",
        "client_secret": "Client secret", "error_title": "That did not work", "back": "Back",
        "done_ok": "Done.", "all": "all", "yes": "yes", "no": "no", "state": "State", "tasks_of": "Tasks",
        "orchestrators": "orchestrators", "online_now": "online now", "via": "via", "total": "total",
        "match_all": "every word", "match_any": "any of the words",
        "st_todo": "To do", "st_in_progress": "In progress", "st_review": "Review", "st_blocked": "Blocked",
        "st_done": "Done", "st_cancelled": "Cancelled",
    },
    "fr": {
        "app": "Tableau de bord vantage-peers", "skip": "Aller au contenu", "nav": "Vues", "team": "Équipe",
        "schedule": "Planification", "memory": "Mémoire", "claims": "Réservations", "activity": "Activité",
        "filter": "Filtrer", "apply": "Appliquer", "reset": "Effacer", "next_page": "Page suivante",
        "first_page": "Première page", "live_on": "En direct", "live_off": "Reconnexion…",
        "signed_as": "Connecté en tant que", "read_only": "lecture seule", "logout": "Se déconnecter", "language": "Langue",
        "presence": "Présence", "online": "en ligne", "idle": "inactif", "stale": "absent", "gone": "arrêté", "any": "tous",
        "instance": "Instance", "summary": "Résumé", "last_seen": "Vu pour la dernière fois",
        "open_tasks": "Tâches ouvertes", "unread": "Non lus", "recipients": "Destinataires", "read": "Lus",
        "to": "À", "content": "Message", "unread_only": "Non lus seulement", "unacked_only": "En attente d'accusé", "dead_only": "Lettres mortes",
        "unacknowledged": "Sans accusé", "deadLettered": "Lettres mortes", "acknowledged": "Accusé reçu",
        "attempt": "Tentative", "channels": "Canaux",
        "compose": "Envoyer un message en tant que", "send": "Envoyer", "receipts": "Accusés",
        "read_at": "Lu le", "board": "Tableau", "assignee": "Responsable", "mission": "Mission",
        "overdue": "En retard seulement", "blocked_only": "Bloquées seulement", "more": "Plus",
        "due": "Échéance", "updated": "Mise à jour", "history": "Historique", "segments": "Périodes de travail",
        "started": "Début", "ended": "Fin", "minutes": "Minutes", "dependencies": "Dépendances",
        "description": "Description", "step_in": "Intervenir", "reassign": "Réattribuer",
        "unblock": "Débloquer", "cancel": "Annuler la tâche", "reason": "Motif",
        "release": "Libérer la réservation", "what": "Événement", "who": "Qui", "when": "Quand",
        "detail": "Détail", "recurring": "Tâches récurrentes", "cron": "Planification (cron)",
        "next_runs": "Prochaines exécutions", "paused": "En pause", "pause": "Mettre en pause",
        "resume": "Reprendre", "jobs": "Tâches du planificateur", "job": "Tâche",
        "last_result": "Dernier résultat", "last_run": "Dernière exécution", "runs": "Exécutions",
        "running": "en cours", "search": "Rechercher", "query": "Rechercher dans les mémoires",
        "matched_by": "Trouvé par", "why": "Pourquoi ce résultat", "mode": "Mode", "kind": "Genre",
        "holder": "Détenteur", "key": "Clé", "since": "Depuis", "expires": "Expire",
        "task_claims": "Tâches réservées", "leases": "Baux détenus", "fencing": "Jeton de clôture", "no_items": "Rien ici.",
        "login": "Se connecter", "your_name": "Votre nom (les agents voient human:<nom>)",
        "master_secret": "Secret maître", "or_client": "ou un client OAuth dont le profil donne accès au tableau de bord",
        "client_id": "Identifiant client", "client_secret": "Secret client", "error_title": "Cela n'a pas marché",
        "back": "Retour", "done_ok": "C'est fait.", "all": "tous", "yes": "oui", "no": "non", "state": "État",
        "tasks_of": "Tâches", "orchestrators": "orchestrateurs", "online_now": "en ligne",
        "via": "via", "total": "total",
        "match_all": "tous les mots", "match_any": "l'un des mots",
        "st_todo": "À faire", "st_in_progress": "En cours", "st_review": "En revue", "st_blocked": "Bloquée",
        "st_done": "Terminée", "st_cancelled": "Annulée",
    },
}

LABELS: dict[str, dict[str, str]] = {lang: {**UI_LABELS[lang], **_OWN[lang]} for lang in LANGS}


def pick(query_lang: str | None, cookie_lang: str | None, accept: str | None) -> str:
    for value in (query_lang, cookie_lang):
        if value in LANGS:
            return value  # type: ignore[return-value]
    if accept and accept.strip().lower().startswith("fr"):
        return "fr"
    return "en"


def translator(lang: str):
    table = LABELS.get(lang, LABELS["en"])
    return lambda key: table.get(key, LABELS["en"].get(key, key))
