#!/usr/bin/env bash
# Posts a pull-request comment through the GitHub API (gh), keeping the audit trail:
#
#   comment.sh plan FILE    edits the pull request's plan comment in place (the bot's comment
#                           carrying the marker below), or creates it the first time
#   comment.sh apply FILE   always adds a new comment: no later plan edits an apply's log
#   comment.sh rehearsal FILE  edits the pull request's rehearsal comment in place, as plan does
#
# Environment: PR (the pull request number), GITHUB_REPOSITORY (owner/name), GH_TOKEN.
# Atlantis posts its own comments and does not use this.
set -euo pipefail
kind=${1:?plan, rehearsal or apply} file=${2:?the comment body}
: "${PR:?}" "${GITHUB_REPOSITORY:?}"
marker="<!-- k8scidr-$kind -->"
comments="repos/$GITHUB_REPOSITORY/issues/$PR/comments"
body=$(mktemp)
trap 'rm -f "$body"' EXIT
case $kind in
plan | rehearsal)
	{ cat "$file"; printf '\n%s\n' "$marker"; } >"$body"
	# The bot's own comment only: a person quoting the marker is never edited.
	id=$(gh api --paginate "$comments" --jq ".[] | select(.user.type == \"Bot\" and (.body | contains(\"$marker\"))) | .id" | tail -n 1)
	if [ -n "$id" ]; then
		gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$body" >/dev/null
	else
		gh api --method POST "$comments" -F "body=@$body" >/dev/null
	fi
	;;
apply)
	gh api --method POST "$comments" -F "body=@$file" >/dev/null
	;;
*)
	echo "comment.sh: $kind: want plan, rehearsal or apply" >&2
	exit 2
	;;
esac
