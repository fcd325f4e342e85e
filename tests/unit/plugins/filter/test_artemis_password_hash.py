"""Password hashes for artemis-users.properties: verified by Artemis's own codec (the distribution's
DefaultSensitiveStringCodec, one-way), a random salt each time a password is hashed, and the line kept while the
password and the iteration count stay the same."""

import os
import subprocess

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.artemis_password_hash import (
    artemis_password_hash, artemis_password_hashes)

# Artemis's verification of a stored hash: exit 0 when every (password, hash) pair on the command line verifies.
VERIFY = """
import java.util.Map;
import org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec;

public class Verify {
   public static void main(String[] args) throws Exception {
      DefaultSensitiveStringCodec codec = new DefaultSensitiveStringCodec();
      codec.init(Map.of(DefaultSensitiveStringCodec.ALGORITHM, DefaultSensitiveStringCodec.ONE_WAY));
      for (int i = 0; i < args.length; i += 2) {
         String stored = args[i + 1].substring("ENC(".length(), args[i + 1].length() - 1);
         System.out.println(codec.verify(args[i].toCharArray(), stored));
      }
   }
}
"""


def _artemis_verifies(tmp_path, pairs):
    classpath = os.path.join(os.environ["ARTEMIS_HOME"], "lib", "*")
    (tmp_path / "Verify.java").write_text(VERIFY)
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", classpath, str(tmp_path / "Verify.java")], check=True,
                   capture_output=True, text=True)
    arguments = [value for pair in pairs for value in pair]
    result = subprocess.run(["java", "-cp", f"{tmp_path}:{classpath}", "Verify", *arguments], check=True,
                            capture_output=True, text=True)
    return [line == "true" for line in result.stdout.split()]


def test_artemis_verifies_the_hash_and_refuses_another_password(tmp_path):
    fast = artemis_password_hash("S3cret!", iterations=1024)
    slow = artemis_password_hash("pässwörd with spaces", iterations=210000)
    assert slow.startswith("ENC(210000:")
    assert _artemis_verifies(tmp_path, [("S3cret!", fast), ("pässwörd with spaces", slow), ("s3cret!", fast)]) == [
        True, True, False]


def test_each_hashing_draws_a_new_salt_but_an_unchanged_password_keeps_its_line():
    first = artemis_password_hash("S3cret!", iterations=2048)
    assert artemis_password_hash("S3cret!", iterations=2048) != first
    assert artemis_password_hash("S3cret!", existing=first, iterations=2048) == first
    # A new password, or a new iteration count, is hashed again.
    assert artemis_password_hash("Other!", existing=first, iterations=2048) != first
    assert artemis_password_hash("S3cret!", existing=first, iterations=4096).startswith("ENC(4096:")


def test_the_hashes_of_a_users_file_are_read_by_user():
    users_file = "# managed\nadmin = ENC(1024:AB:CD)\napp = ENC(2048:01:02)\nodd = plain\n\n"
    assert artemis_password_hashes(users_file) == {"admin": "ENC(1024:AB:CD)", "app": "ENC(2048:01:02)"}
    assert artemis_password_hashes("") == {}


@pytest.mark.parametrize("password, iterations", [("", 1024), (None, 1024), ("x", 100), ("x", True)])
def test_bad_input_is_refused(password, iterations):
    with pytest.raises(AnsibleFilterError, match="artemis_password_hash"):
        artemis_password_hash(password, iterations=iterations)
