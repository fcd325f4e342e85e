# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Artemis security-settings from role grants, address staging and the estate's internal addresses.

Shared by the broker role (through the artemis_security_settings filter, for broker.xml, and artemis_role_errors, for
its checks) and artemis_site (which applies the same settings at runtime), so a site's configuration and its
activation never disagree.
"""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    ESTATE_ADDRESS_PREFIX, MIRROR_ADDRESS_PREFIX, RESERVED_PREFIXES)

# What a staged (passive) site withholds from clients: nothing is produced there and nothing is delivered.
STAGED_PERMISSIONS = ("send", "consume")

# Every permission the collection manages, in the order of ActiveMQServerControl.addSecuritySettings.
PERMISSIONS = ("send", "consume", "createDurableQueue", "deleteDurableQueue", "createNonDurableQueue",
               "deleteNonDurableQueue", "manage", "browse", "createAddress", "deleteAddress")

# The matches of the internal addresses, where only the administrator acts, and the other datacentres' brokers where
# the estate grants them more specific matches; never a client role, whatever its match ("#" included):
# - every address Artemis takes a sender link to as a mirror (whoever may send there deletes queues and acknowledges
#   messages at will), the mirrors' store-and-forward queues among them. Artemis's "#" follows a delimiter, so the
#   prefix takes two matches: followed by "." and followed by anything else;
# - the estate's own addresses (the bridge engine's outbound, inbound, export and notice addresses, the probes of the
#   catch-all group, what a passive site keeps);
# - Artemis's notifications and management address (there the manage permission is every operation on the broker).
INTERNAL_MATCHES = (MIRROR_ADDRESS_PREFIX + ".#", MIRROR_ADDRESS_PREFIX + "*.#", ESTATE_ADDRESS_PREFIX + "#",
                    "activemq.#")


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
    probe address under its group's ``P#`` makes Artemis stop every bridge of the broker: AMQ224058); a peer's match
    is staged for clients like any other (the bridge engine's peer match is a group's own ``P#``). Client roles have
    nothing on INTERNAL_MATCHES (role_errors refuses a client match under them).
    """
    for entry in staging:
        if not isinstance(entry, dict) or not isinstance(entry.get("prefix"), str) or "staged" not in entry:
            raise ValueError("each staging entry needs 'prefix' and 'staged', got %r" % (entry,))
    client_matches = [role.get("match", "#") for role in roles]
    staged_matches = [entry["prefix"] + "#" for entry in staging if entry["prefix"]]
    peer_matches = [role.get("match", "#") for role in peer_roles]

    settings = []
    for match in sorted(set(["#"] + client_matches + staged_matches + peer_matches + list(INTERNAL_MATCHES))):
        if match in INTERNAL_MATCHES:
            clients, withheld = [], ()
        else:
            inherits = match not in client_matches and match in staged_matches
            clients = [role for role in roles if role.get("match", "#") == ("#" if inherits else match)]
            entry = staging_entry(match, staging)
            withheld = STAGED_PERMISSIONS if entry and entry["staged"] else ()

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


def group_settings(roles, admin_role, staging, peer_roles, groups):
    """``{match: {permission: [role, ...]}}`` of the client matches that belong to ``groups`` (names) under
    ``staging``: what a datacentre applies there, its own broker.xml's settings if staging stages nothing, fenced if
    it stages ``groups``. The other datacentres' brokers keep their grants. Matches only peers hold, and the internal
    ones, are left out: they never change with the state."""
    client_matches = set(setting["match"] for setting in security_settings(roles, admin_role, PERMISSIONS, staging))
    settings = security_settings(roles, admin_role, PERMISSIONS, staging, peer_roles)
    return dict((setting["match"], setting["permissions"]) for setting in settings
                if setting["match"] in client_matches and setting["match"] not in INTERNAL_MATCHES
                and (staging_entry(setting["match"], staging) or {}).get("group") in groups)


def fence_settings(fence_staging, roles, admin_role, peer_roles):
    """Per group of ``fence_staging`` (artemis_estate.fence_staging), its fenced settings as the broker plugin's
    activation check applies them: ``{group: {match: [roles, comma-separated, per PERMISSIONS]}}``."""
    fences = {}
    for group, staging in sorted(fence_staging.items()):
        settings = group_settings(roles, admin_role, staging, peer_roles, [group])
        fences[group] = dict((match, [",".join(permissions[permission]) for permission in PERMISSIONS])
                             for match, permissions in sorted(settings.items()))
    return fences


def role_errors(roles, users=(), management_roles=(), peer_roles=()):
    """Why the client roles ``roles`` (broker_roles) could reach replication, one sentence per finding, each naming
    the role; [] when they cannot. ``users``: the password users (broker_users), ``management_roles``: the roles with
    every management operation (broker_management_roles), ``peer_roles``: the other datacentres' brokers' grants
    (broker_peer_roles), whose role names no client may hold.

    Artemis applies the most specific match, and a match without "#" is more specific than any with it, so a client
    match that starts with a wildcard (other than "#" alone, which every internal match outranks) or with a reserved
    prefix could win over the estate's match on an internal address."""
    peer_names = sorted(set(role["name"] for role in peer_roles))
    errors = []
    for role in roles:
        name, match = role.get("name"), role.get("match", "#")
        first_word = match.split(".")[0]
        reserved = next((prefix for prefix in RESERVED_PREFIXES if match.startswith(prefix)), None)
        if match != "#" and ("*" in first_word or "#" in first_word):
            errors.append("broker_roles: role %s: match %r starts with a wildcard, which reaches the estate's internal "
                          "addresses; start it with the first word of your addresses, or use '#' for all of them"
                          % (name, match))
        elif reserved:
            errors.append("broker_roles: role %s: match %r is under %r, which belongs to the estate and Artemis"
                          % (name, match, reserved))
        if "manage" in role.get("permissions", []):
            errors.append("broker_roles: role %s grants manage, with which a client could run any management "
                          "operation (delete the mirrors' queues among them); operators get a role in "
                          "broker_management_roles instead" % name)
        if name in management_roles:
            errors.append("broker_roles: role %s is also in broker_management_roles, which may run every management "
                          "operation (the mirrors' queues and broker connections among them); give the operators a "
                          "role of their own" % name)
        if name in peer_names:
            errors.append("broker_roles: role %s is the role the other datacentres' brokers log in with" % name)
    for user in users:
        taken = sorted(set(user.get("roles", [])) & set(peer_names))
        if taken:
            errors.append("broker_users: user %s has the role %s, which only the other datacentres' brokers hold"
                          % (user.get("name"), ", ".join(taken)))
    return errors


def directory_role_search(role_search, role_name, withheld_roles):
    """LDAPLoginModule's roleSearchMatching for ``role_search`` (an LDAP filter, ``{0}`` the user's DN) that leaves
    out every group whose ``role_name`` attribute names one of ``withheld_roles`` (the other datacentres' brokers'
    roles, which reach the internal addresses): whoever manages the directory cannot give a login replication's
    rights. Values are escaped for the LDAP filter (RFC 4515), then for Java's MessageFormat, which reads the pattern."""
    def ldap_value(value):
        return "".join("\\%02x" % ord(char) if char in "\\*()\0" else char for char in value)

    def message_format(text):
        return text.replace("'", "''").replace("{", "'{'").replace("}", "'}'")

    withheld = sorted(set(withheld_roles))
    if not withheld:
        return role_search
    exclusions = "".join("(!(%s=%s))" % (role_name, ldap_value(role)) for role in withheld)
    return "(&%s%s)" % (role_search, message_format(exclusions))
