"""The documented mission templates, seeded once per database file (INSERT ... ON CONFLICT DO NOTHING,
so a template an operator has edited is never overwritten).

Step titles of issue-resolution-v3, issue-resolution-v2, repo-fix-v1, new-feature-v1 and the four
phases of mission-generic-v1 are the documented ones (descriptions follow the documented key
requirements). The docs name chrome-extension-mission-v1, pricing-research-v1, new-website-build
and gui-iframe-embed-v1 with their purpose only: their steps here are written from that purpose
(see docs/tasks.md). Every template is a linear chain: step i depends on step i-1.
"""

from __future__ import annotations

from typing import Any

from ...core.parties import SYSTEM

SEED_AUTHOR = SYSTEM
DEFAULT_TEMPLATE = "issue-resolution-v3"


def _chain(steps: list[tuple[str, str] | tuple[str, str, str]]) -> list[dict[str, Any]]:
    out = []
    for i, step in enumerate(steps):
        item: dict[str, Any] = {"title": step[0], "description": step[1]}
        if len(step) > 2:
            item["assignedTo"] = step[2]
        if i:
            item["dependsOn"] = [i - 1]
        out.append(item)
    return out


ISSUE = "issue {{repo}}#{{issueNumber}}"

TEMPLATES: list[dict[str, Any]] = [
    {"name": "issue-resolution-v3", "isDefault": True,
     "description": "The canonical Issue Resolution Protocol: 9 steps (T0-T8), from acknowledgement to code review.",
     "steps": _chain([
         ("Acknowledge", f"Post a GitHub comment on {ISSUE} confirming receipt and who investigates."),
         ("KB Search", "Search fixPatterns and episodes for similar issues; document what you found (or that "
                       "nothing matched)."),
         ("Identify & Run Tests", "Find and run the existing tests of the affected code in {{repo}}; document "
                                  "PASS/FAIL."),
         ("Write Missing Tests", f"Write the failing regression test that reproduces {ISSUE}; commit it."),
         ("Fix", "Apply the fix; the regression test from T3 must pass."),
         ("Run ALL Tests", "Run the full suite: zero regressions."),
         ("Deploy Dev + Push", "Deploy to dev (`convex dev --once`), push the branch, and create the PR "
                               "immediately."),
         ("Verification Preview", "Test on the preview deployment; ask for human validation."),
         ("Code Review", "Reviewer agent on the diff, then update the KB with the fix pattern."),
     ])},
    {"name": "issue-resolution-v2", "isDefault": False,
     "description": "The older 14-step Issue Resolution Protocol (T0-T13), with GitHub auto-comments at T6, T8 "
                    "and T11.",
     "steps": _chain([
         ("Acknowledge", f"Auto-posted GitHub comment on {ISSUE}: investigating, assigned to the orchestrator."),
         ("KB Search", "Search fix patterns and similar episodes."),
         ("Verify Config", "Check the environment and configuration."),
         ("Identify Tests", "Find the test suites of the affected component."),
         ("Run Existing Tests", "Run the tests; document PASS/FAIL."),
         ("Evaluate Coverage", "Do the tests cover the bug?"),
         ("Write Missing Tests", "Write a test that reproduces the bug (auto-comment: bug reproduced)."),
         ("Fix", "Delegate the fix to a specialist agent."),
         ("Run ALL Tests", "Full suite, 0 regressions (auto-comment: fix ready, all tests pass)."),
         ("Code Review", "Review the diff."),
         ("Deploy Dev + Push", "Deploy to dev and push the branch."),
         ("Verification Preview", "Test on the preview, human confirmation (auto-comment: fixed and deployed)."),
         ("Update KB", "Store the fix pattern in VantagePeers."),
         ("Close Issue", f"Close GitHub {ISSUE}."),
     ])},
    {"name": "repo-fix-v1", "isDefault": False,
     "description": "Fix an issue on an external or third-party repository whose root cause is known.",
     "steps": _chain([
         ("Search KB", "Search fixPatterns for the known root cause and prior fixes."),
         ("Codebase Analysis", "PRE-FIX protocol on {{repo}}: read CONTRIBUTING.md and the 5 latest PRs, note the "
                               "conventions."),
         ("Issue Diagnosis", f"Reproduce and diagnose {ISSUE}; confirm the root cause."),
         ("Impact Analysis", "Grep every downstream consumer of the data the fix changes."),
         ("Write Fix + Tests", "Write the fix with a regression test."),
         ("Run Tests", "Run the project's test suite; zero regressions."),
         ("Code Review", "Review the diff against the repository's conventions."),
         ("Create PR + Comment Issue", f"Open the PR and comment on {ISSUE} with the link."),
         ("QA Verification", "Verify the fix end to end."),
         ("Store Fix Pattern", "Store the fix pattern in the KB."),
     ])},
    {"name": "new-feature-v1", "isDefault": False,
     "description": "Build a new feature with each step delegated to a specialist agent.",
     "steps": _chain([
         ("Search KB", "Search the KB for prior patterns and decisions about {{feature}}."),
         ("Requirements Analysis", "Write the requirements and acceptance criteria of {{feature}}."),
         ("Schema + Backend", "Schema and backend functions.", "dev-convex-expert"),
         ("API/External Services", "Integrate the external APIs and services.", "dev-fal-expert"),
         ("Frontend UI", "Build the user interface.", "dev-frontend"),
         ("i18n", "Translate every new string.", "translator"),
         ("Tests + QA", "Tests and QA of the whole feature.", "dev-qa"),
         ("Code Review", "Review the complete diff.", "code-reviewer"),
         ("PR + Deploy Preview", "Open the PR and deploy a preview."),
         ("Store Pattern KB", "Store the reusable pattern in the KB."),
     ])},
    {"name": "mission-generic-v1", "isDefault": False,
     "description": "Generic fallback: plan / execute / validate / complete.",
     "steps": _chain([
         ("Plan", "Define the scope, the deliverables and the acceptance criteria."),
         ("Execute", "Do the work planned in step 0."),
         ("Validate", "Check every deliverable against the acceptance criteria."),
         ("Complete", "Hand over, record the outcome (diary, KB) and close the mission."),
     ])},
    {"name": "chrome-extension-mission-v1", "isDefault": False,
     "description": "Build and publish a Chrome extension from scratch (steps written from the documented purpose).",
     "steps": _chain([
         ("Spec", "Write the extension spec: features, permissions, target users."),
         ("Manifest V3 Setup", "Scaffold the Manifest V3 project and permissions."),
         ("Content Scripts", "Implement the content scripts."),
         ("Background Service Worker", "Implement the background service worker."),
         ("Popup UI", "Build the popup UI."),
         ("Packaging", "Test, then package the extension."),
         ("Store Submission", "Submit to the Chrome Web Store and track the review."),
     ])},
    {"name": "pricing-research-v1", "isDefault": False,
     "description": "Competitive pricing research (steps written from the documented purpose).",
     "steps": _chain([
         ("Market Scan", "List competitors and collect their public pricing."),
         ("Competitive Matrix", "Build the feature/price matrix."),
         ("Pricing Model Analysis", "Analyse the pricing models (per seat, usage, tiers)."),
         ("Recommendation Document", "Write the pricing recommendation with its data."),
         ("Stakeholder Review", "Review the recommendation with the stakeholders."),
     ])},
    {"name": "new-website-build", "isDefault": False,
     "description": "End-to-end website build from design brief to go-live (steps written from the documented "
                    "purpose).",
     "steps": _chain([
         ("Design Brief", "Collect the design brief and goals."),
         ("Wireframes", "Produce and validate the wireframes."),
         ("Tech Stack Selection", "Choose the stack and hosting."),
         ("Content", "Write and collect the content."),
         ("Implementation", "Build the site."),
         ("SEO Review", "Review SEO: metadata, performance, sitemap."),
         ("Staging QA", "QA on staging across devices."),
         ("Launch", "Go live and hand over the checklist."),
     ])},
    {"name": "gui-iframe-embed-v1", "isDefault": False,
     "description": "Standard VP Gen UI iframe embed integration (SEP-1865) (steps written from the documented "
                    "purpose).",
     "steps": _chain([
         ("Backend Session Registry", "Implement the iframe embed session registry."),
         ("Origin Validation", "Validate allowed origins for embedding."),
         ("UI Components", "Build the embedded UI components."),
         ("Integration Tests", "Write the integration tests of the embed flow."),
         ("Deployment", "Deploy and verify in the client app."),
     ])},
]
