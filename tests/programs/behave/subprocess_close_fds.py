# subprocess with preexec_fn and close_fds: the child closes every inherited
# descriptor above 2 before exec (a Python user's everyday call).
import subprocess

r = subprocess.run(["echo", "hello from the child"], preexec_fn=lambda: None,
                   close_fds=True, capture_output=True)
print(r.returncode, r.stdout.decode(), end="")
r = subprocess.run(["sh", "-c", "echo second > second.txt; echo second child"],
                   preexec_fn=lambda: None, close_fds=True, stdout=subprocess.PIPE)
print(r.returncode, r.stdout.decode(), end="")
