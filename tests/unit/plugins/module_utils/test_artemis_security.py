"""The LDAP login's group search leaves out the roles of replication, whatever the directory holds."""

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_security import directory_role_search


def test_nothing_withheld_leaves_the_search_as_it_is():
    assert directory_role_search("(member={0})", "cn", []) == "(member={0})"


def test_groups_naming_a_peer_role_are_left_out_of_the_search():
    assert directory_role_search("(member={0})", "cn", ["peer-dc2", "peer-dc1", "peer-dc2"]) == \
        "(&(member={0})(!(cn=peer-dc1))(!(cn=peer-dc2)))"


def test_a_role_name_is_escaped_for_the_ldap_filter_then_for_message_format():
    # RFC 4515 escapes * ( ) \ as \2a \28 \29 \5c; MessageFormat takes '' for a quote and '{' '}' for braces. Java's
    # MessageFormat gives this back as (&(member=<DN>)(!(cn=a\2a\28b\29\5cc'{d}))) (checked with jshell).
    assert directory_role_search("(member={0})", "cn", [r"a*(b)\c'{d}"]) == \
        r"(&(member={0})(!(cn=a\2a\28b\29\5cc'''{'d'}')))"
