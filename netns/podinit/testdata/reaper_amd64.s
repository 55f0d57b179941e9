# The pod init's reaper on linux/amd64 (see reaper_amd64.go, which holds these bytes).
# Assemble: as -o r.o reaper_amd64.s && objcopy -O binary -j .text r.o r.bin
# TestReaperCodeMatchesSource checks the bytes against this file when as is installed.
#
# envp[0] is the app's pid in decimal; the process takes argv[0] as its name. Block the signals passed on (HUP INT QUIT USR1
# USR2 TERM) and SIGCHLD, then: reap every child that has exited; when the app has, exit
# with its status (128+signal when a signal ended it); else wait for a signal and pass
# anything but SIGCHLD on to the app.
	.intel_syntax noprefix
	.globl _start
_start:
	mov edi, 15                   # prctl(PR_SET_NAME, argv[0]): ps and top name it
	mov rsi, [rsp + 8]
	mov eax, 157
	syscall
	mov rbx, [rsp]                # argc
	mov rsi, [rsp + rbx*8 + 16]   # envp[0]
	xor r12d, r12d                # r12d: the app's pid
parse:
	movzx eax, byte ptr [rsi]
	test eax, eax
	jz parsed
	sub eax, 0x30
	imul r12d, r12d, 10
	add r12d, eax
	inc rsi
	jmp parse
parsed:
	push 0x14A07                  # the signal set: 1 2 3 10 12 15 17 (bit n-1)
	mov r13, rsp                  # r13: &set
	sub rsp, 8
	mov r14, rsp                  # r14: &status
	xor edi, edi                  # rt_sigprocmask(SIG_BLOCK, &set, NULL, 8)
	mov rsi, r13
	xor edx, edx
	mov r10d, 8
	mov eax, 14
	syscall
reap:
	mov edi, -1                   # wait4(-1, &status, WNOHANG, NULL)
	mov rsi, r14
	mov edx, 1
	xor r10d, r10d
	mov eax, 61
	syscall
	test eax, eax
	jle wait                      # none exited (0) or no child (-ECHILD)
	cmp eax, r12d
	jne reap                      # an orphan: reaped
	mov eax, [r14]
	mov ecx, eax
	and ecx, 0x7f                 # WTERMSIG
	jz exited
	lea edi, [rcx + 128]
	jmp exit
exited:
	shr eax, 8                    # WEXITSTATUS
	movzx edi, al
exit:
	mov eax, 231                  # exit_group(status)
	syscall
wait:
	mov rdi, r13                  # rt_sigtimedwait(&set, NULL, NULL, 8)
	xor esi, esi
	xor edx, edx
	mov r10d, 8
	mov eax, 128
	syscall
	cmp eax, 17                   # SIGCHLD
	je reap
	test eax, eax
	jle reap
	mov esi, eax                  # kill(app, signal)
	mov edi, r12d
	mov eax, 62
	syscall
	jmp reap
