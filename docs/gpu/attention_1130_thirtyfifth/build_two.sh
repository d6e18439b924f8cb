# Sourced by profile.sh and flash_stream.sh from the tree's root, with $out set: builds the tree (A) and the
# variant .ab/$1 (make_variants.sh), keeping /tmp/A.so and /tmp/$1.so; $so is where the built extension goes.
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) MAX_JOBS=$(nproc)
so=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
cp "$so" /tmp/A.so
kernel=cpp/kernels/cuda/mla_attention_wgmma.cu
cp $kernel /tmp/A.cu && cp ".ab/$1/$kernel" $kernel
python3 -m pip install --no-build-isolation --no-deps -e . > "$out/rebuild.log" 2>&1 || { tail -30 "$out/rebuild.log"; exit 1; }
cp "$so" "/tmp/$1.so" && cp /tmp/A.cu $kernel && touch $kernel
