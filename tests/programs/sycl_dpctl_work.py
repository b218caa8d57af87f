# dpctl: an OpenCL C program built at run time, USM allocations, copies,
# a synchronous and an asynchronous kernel submission and a barrier.
import ctypes
import dpctl
import dpctl.memory as dpm
import dpctl.program as dpp
import numpy as np

q = dpctl.SyclQueue()
src = """
__kernel void axpy(__global const long *a, __global long *b, long s) {
    size_t i = get_global_id(0);
    b[i] = s * a[i] + b[i];
}
"""
kernel = dpp.create_program_from_source(q, src).get_sycl_kernel("axpy")
n = 4096
ha = np.arange(n, dtype="i8")
hb = np.ones(n, dtype="i8")
a = dpm.MemoryUSMDevice(ha.nbytes, queue=q)
b = dpm.MemoryUSMShared(hb.nbytes, queue=q)
q.memcpy(a, ha, ha.nbytes)
q.memcpy(b, hb, hb.nbytes)
q.submit(kernel, [a, b, ctypes.c_int64(5)], [n])
e = q.submit_async(kernel, [a, b, ctypes.c_int64(2)], [n], [64])
q.submit_barrier([e]).wait()
q.memcpy(hb, b, hb.nbytes)
print(int(hb.sum()))
