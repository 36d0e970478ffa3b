#ifndef TINCAN_CSYSTEM_H
#define TINCAN_CSYSTEM_H

// Deliberately no system headers here: including <sys/socket.h> from this public header makes
// Clang attribute those declarations to this module and breaks clean builds of Swift files that
// import only Glibc. Every parameter is a plain C type.

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC. Returns the new fd or -1 with errno set.
int csystem_accept_nonblocking(int fd, void *address, unsigned int *length);

/// pipe2(2) with O_NONBLOCK (when `nonblocking` is non-zero) and O_CLOEXEC.
int csystem_pipe(int fds[2], int nonblocking);


#endif
