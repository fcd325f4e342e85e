# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Artemis security-settings from role grants and address staging.

Shared by the broker role (through the artemis_security_settings filter, for broker.xml) and artemis_site (which
applies the same settings at runtime), so a site's configuration and its activation never disagree.
"""

from __future__ import annotations

# What a staged (passive) site withholds from clients: nothing is produced there and nothing is delivered.
STAGED_PERMISSIONS = ("send", "consume")

# Never staged: the management address and its reply queues carry no replicated data, and monitoring (the Artemis
# CLI's `queue stat`, core management clients) must work on a passive site too. Clients get the roles of "#" there.
UNSTAGED_MATCHES = ("activemq.management.#",)

# Every permission the collection manages, in the order of ActiveMQServerControl.addSecuritySettings.
PERMISSIONS = ("send", "consume", "createDurableQueue", "deleteDurableQueue", "createNonDurableQueue",
               "deleteNonDurableQueue", "manage", "browse", "createAddress", "deleteAddress")


def staging_entry(match, staging):
    """The staging entry with the longest prefix that covers ``match`` (prefix "" covers every address)."""
    covering = [entry for entry in staging if match.startswith(entry["prefix"])]
    return max(covering, key=lambda entry: len(entry["prefix"]), default=None)


def covers(wildcard, match):
    """Whether Artemis would apply ``wildcard`` to the addresses of ``match`` (exact matches and ``<prefix>#``, the
    forms the collection's matches take)."""
    return wildcard == match or (wildcard.endswith("#") and match.startswith(wildcard[:-1]))


def security_settings(roles, admin_role, all_permissions, staging=(), peer_roles=()):
    """Return ``[{match, permissions: {permission: [role, ...]}}]`` sorted by match.

    Artemis applies only the most specific match to an address, so: the administrator is granted everything on
    every match; every staged prefix gets a match of its own, on which the roles granted on ``#`` apply; on a match
    that a staged entry covers, client roles lose ``send`` and ``consume``. ``peer_roles`` (other brokers) keep their
    grants on a staged match and on every more specific match theirs covers (a bridge's send refused on, say, a
    probe address under its group's ``P#`` makes Artemis stop every bridge of the broker: AMQ224058), and clients
    keep theirs on ``UNSTAGED_MATCHES``; a peer's match is staged for clients like any other (the bridge engine's
    peer match is a group's own ``P#``).
    """
    for entry in staging:
        if not isinstance(entry, dict) or not isinstance(entry.get("prefix"), str) or "staged" not in entry:
            raise ValueError("each staging entry needs 'prefix' and 'staged', got %r" % (entry,))
    client_matches = [role.get("match", "#") for role in roles]
    staged_matches = [entry["prefix"] + "#" for entry in staging if entry["prefix"]]
    unstaged_matches = list(UNSTAGED_MATCHES) if staging else []
    peer_matches = [role.get("match", "#") for role in peer_roles]

    settings = []
    for match in sorted(set(["#"] + client_matches + staged_matches + unstaged_matches + peer_matches)):
        inherits = match not in client_matches and match in staged_matches + unstaged_matches
        clients = [role for role in roles if role.get("match", "#") == ("#" if inherits else match)]
        entry = staging_entry(match, staging)
        withheld = STAGED_PERMISSIONS if entry and entry["staged"] and match not in unstaged_matches else ()

        permissions = {}
        for permission in all_permissions:
            granted = [admin_role]
            granted += [role["name"] for role in clients
                        if permission in role["permissions"] and permission not in withheld]
            granted += [role["name"] for role in peer_roles
                        if covers(role.get("match", "#"), match) and permission in role["permissions"]]
            permissions[permission] = sorted(set(granted), key=granted.index)
        settings.append({"match": match, "permissions": permissions})
    return settings
